import { Args, HelpDoc, Options, ValidationError } from "@effect/cli"
import { Effect } from "effect"

/** The command lines' options and arguments, checked with messages that name the field and the rule. */

const excerpt = (value: string) => JSON.stringify(value.length > 20 ? `${value.slice(0, 20)}…` : value)

const invalid = (field: string, rule: string, value: string) => HelpDoc.p(`${field}: ${rule} (got ${excerpt(value)})`)

const integer = (field: string) => (value: string) =>
  /^[+-]?\d+$/.test(value.trim()) && Number.isSafeInteger(Number(value))
    ? Effect.succeed(Number(value))
    : Effect.fail(invalid(field, "must be an integer", value))

/** An integer option; @effect/cli's own says "'abc' is not a integer" without naming the option. */
export const integerOption = (name: string) =>
  Options.text(name).pipe(
    Options.withPseudoName("integer"),
    Options.mapEffect((value) => Effect.mapError(integer(`--${name}`)(value), ValidationError.invalidValue))
  )

/** An integer argument, named in its errors. */
export const integerArgument = (name: string) => Args.text({ name }).pipe(Args.mapEffect(integer(name)))

/** An option taking one of `choices`, named in its errors. */
export const choiceOption = <const Choice extends string>(name: string, choices: ReadonlyArray<Choice>) =>
  Options.text(name).pipe(
    Options.withPseudoName(choices.join(" | ")),
    Options.mapEffect((value) =>
      choices.includes(value as Choice)
        ? Effect.succeed(value as Choice)
        : Effect.fail(ValidationError.invalidValue(invalid(`--${name}`, `must be one of ${choices.join(", ")}`, value)))
    )
  )

/** A text option of 1 to `max` characters, not only spaces, named in its errors. */
export const nameOption = (name: string, max: number) =>
  Options.text(name).pipe(
    Options.mapEffect((value) =>
      value.trim().length > 0 && value.length <= max
        ? Effect.succeed(value)
        : Effect.fail(ValidationError.invalidValue(invalid(`--${name}`, `must be 1 to ${max} characters, not only spaces`, value)))
    )
  )

/** An absolute http(s) URL option. */
export const urlOption = (name: string) =>
  Options.text(name).pipe(
    Options.withPseudoName("url"),
    Options.mapEffect((value) =>
      isHttpUrl(value)
        ? Effect.succeed(value)
        : Effect.fail(ValidationError.invalidValue(invalid(`--${name}`, "must be an absolute http(s) URL", value)))
    )
  )

export const isHttpUrl = (value: string) => {
  try {
    const url = new URL(value)
    return url.protocol === "http:" || url.protocol === "https:"
  } catch {
    return false
  }
}
