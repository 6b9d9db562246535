import { Effect } from "effect"
import { Argument, CliError, Flag } from "effect/cli"
import { isHttpUrl } from "../Config/AppConfig.js"

const excerpt = (value: string) => JSON.stringify(value.length > 20 ? `${value.slice(0, 20)}…` : value)

/** The value when `valid`, else the error `field: rule (got "value")`. */
const checked = (field: string, rule: string, valid: (value: string) => boolean) => (value: string) =>
  valid(value)
    ? Effect.succeed(value)
    : Effect.fail(new CliError.ValidationError({ message: `${field}: ${rule} (got ${excerpt(value)})` }))

const isInteger = (value: string) => /^[+-]?\d+$/.test(value.trim()) && Number.isSafeInteger(Number(value))

const integer = (field: string) => (value: string) =>
  Effect.map(checked(field, "must be an integer", isInteger)(value), Number)

/** An integer option whose error reads as every other rule's here, which `Flag.Int`'s does not. */
export const integerOption = (name: string) =>
  Flag.String(name).pipe(Flag.withMetavar("integer"), Flag.mapEffect(integer(`--${name}`)))

export const integerArgument = (name: string) => Argument.String(name).pipe(Argument.mapEffect(integer(name)))

export const choiceOption = <const Choice extends string>(name: string, choices: ReadonlyArray<Choice>) =>
  Flag.String(name).pipe(
    Flag.withMetavar(choices.join(" | ")),
    Flag.mapEffect(checked(`--${name}`, `must be one of ${choices.join(", ")}`, (v) => choices.includes(v as Choice))),
    Flag.map((value) => value as Choice)
  )

export const nameOption = (name: string, max: number) =>
  Flag.String(name).pipe(
    Flag.mapEffect(
      checked(`--${name}`, `must be 1 to ${max} characters, not only spaces`, (v) => v.trim() !== "" && v.length <= max)
    )
  )

export const urlOption = (name: string) =>
  Flag.String(name).pipe(
    Flag.withMetavar("url"),
    Flag.mapEffect(checked(`--${name}`, "must be an absolute http(s) URL", isHttpUrl))
  )

export const switchOption = (name: string) => Flag.Boolean(name).pipe(Flag.withDefault(false))
