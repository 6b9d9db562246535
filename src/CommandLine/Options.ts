import { Effect } from "effect"
import { Argument, CliError, Flag } from "effect/cli"

/** The command lines' options and arguments, checked with messages that name the field and the rule. */

const excerpt = (value: string) => JSON.stringify(value.length > 20 ? `${value.slice(0, 20)}…` : value)

const invalid = (field: string, rule: string, value: string) =>
  new CliError.ValidationError({ message: `${field}: ${rule} (got ${excerpt(value)})` })

const integer = (field: string) => (value: string) =>
  /^[+-]?\d+$/.test(value.trim()) && Number.isSafeInteger(Number(value))
    ? Effect.succeed(Number(value))
    : Effect.fail(invalid(field, "must be an integer", value))

/** An integer option whose error reads as every other rule's here (`Flag.Int`'s says `Invalid value for flag --limit: "abc". Expected: …`). */
export const integerOption = (name: string) =>
  Flag.String(name).pipe(Flag.withMetavar("integer"), Flag.mapEffect(integer(`--${name}`)))

/** An integer argument, named in its errors. */
export const integerArgument = (name: string) => Argument.String(name).pipe(Argument.mapEffect(integer(name)))

/** An option taking one of `choices`, named in its errors. */
export const choiceOption = <const Choice extends string>(name: string, choices: ReadonlyArray<Choice>) =>
  Flag.String(name).pipe(
    Flag.withMetavar(choices.join(" | ")),
    Flag.mapEffect((value) =>
      choices.includes(value as Choice)
        ? Effect.succeed(value as Choice)
        : Effect.fail(invalid(`--${name}`, `must be one of ${choices.join(", ")}`, value))
    )
  )

/** A text option of 1 to `max` characters, not only spaces, named in its errors. */
export const nameOption = (name: string, max: number) =>
  Flag.String(name).pipe(
    Flag.mapEffect((value) =>
      value.trim().length > 0 && value.length <= max
        ? Effect.succeed(value)
        : Effect.fail(invalid(`--${name}`, `must be 1 to ${max} characters, not only spaces`, value))
    )
  )

/** An absolute http(s) URL option. */
export const urlOption = (name: string) =>
  Flag.String(name).pipe(
    Flag.withMetavar("url"),
    Flag.mapEffect((value) =>
      isHttpUrl(value)
        ? Effect.succeed(value)
        : Effect.fail(invalid(`--${name}`, "must be an absolute http(s) URL", value))
    )
  )

/** A boolean option, false when absent. */
export const switchOption = (name: string) => Flag.Boolean(name).pipe(Flag.withDefault(false))

export const isHttpUrl = (value: string) => URL.canParse(value) && ["http:", "https:"].includes(new URL(value).protocol)
