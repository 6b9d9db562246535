import { HelpDoc, ValidationError } from "@effect/cli"
import { HttpClientError } from "@effect/platform"
import { BunContext, BunRuntime } from "@effect/platform-bun"
import { Cause, ConfigError, type Console, Effect, Exit, Option, ParseResult, Predicate } from "effect"
import { summarizeCause } from "../Observability/CauseSummary.js"

/**
 * How the command lines (`petstore`, `petstore keys`, `db`) run: help without colours where they do
 * not belong, and every error as one plain line on stderr with a non-zero exit.
 */

/** Colours only on a terminal, and never with NO_COLOR set (https://no-color.org). */
const colours = process.stdout.isTTY === true && (process.env["NO_COLOR"] ?? "") === ""

const plain = (text: string) => text.replace(/\x1b\[[0-9;]*m/g, "")

const describeConfigError = (error: ConfigError.ConfigError): string => {
  switch (error._op) {
    case "And":
    case "Or":
      return describeConfigError(error.left)
    case "MissingData":
      return `${error.path.join(".")}: must be set`
    default:
      return `${error.path.join(".")}: ${error.message}`
  }
}

/**
 * One line for a failure: the field and the rule. `fields` names, for a field of the API, the
 * option that set it (`categoryId` → `--category-id`).
 */
export const describeFailure = (error: unknown, fields: Readonly<Record<string, string>>): string => {
  if (ValidationError.isValidationError(error)) return plain(HelpDoc.toAnsiText(error.error)).replace(/\s+/g, " ").trim()
  if (ConfigError.isConfigError(error)) return describeConfigError(error)
  if (ParseResult.isParseError(error)) {
    const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
    if (issue === undefined) return error.message
    const field = issue.path.map(String).join(".")
    return field === "" ? issue.message : `${fields[field] ?? field}: ${issue.message}`
  }
  if (HttpClientError.isHttpClientError(error)) {
    const url = error.request.url
    if (error._tag === "RequestError" && error.reason === "Transport") {
      const cause = Predicate.hasProperty(error.cause, "code") ? ` (${String(error.cause.code)})` : ""
      return `base URL: nothing answers at ${new URL(url).origin}${cause}; set --base-url or PETSTORE_BASE_URL`
    }
    if (error._tag === "ResponseError") return `${url}: unexpected answer with status ${error.response.status}`
    return `${url}: ${error.message}`
  }
  if (Predicate.hasProperty(error, "message") && typeof error.message === "string") return error.message.split("\n")[0]!
  return String(error)
}

/** The default console, with @effect/cli's help uncoloured where colours are off and its error output left to `run`. */
const defaultConsole = Effect.runSync(Effect.console)
const console: Console.Console = {
  ...defaultConsole,
  log: (...args) => defaultConsole.log(...(colours ? args : args.map((arg) => typeof arg === "string" ? plain(arg) : arg))),
  error: () => Effect.void
}

/**
 * Runs a command line's program: output on stdout, each error as one line on stderr and exit code 1.
 * With `interrupted`, a stop by SIGINT or SIGTERM is a failure too: that line and exit code 1.
 */
export const run = <E>(
  program: Effect.Effect<void, E, BunContext.BunContext>,
  fields: Readonly<Record<string, string>> = {},
  interrupted?: string
) =>
  program.pipe(
    Effect.onInterrupt(() => interrupted === undefined ? Effect.void : Effect.sync(() => process.stderr.write(`${interrupted}\n`))),
    Effect.withConsole(console),
    Effect.tapErrorCause((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.void
        : Effect.sync(() => {
          const message = Option.match(Cause.failureOption(cause), {
            onNone: () => summarizeCause(cause),
            onSome: (error) => describeFailure(error, fields)
          })
          process.stderr.write(`${message}\n`)
        })
    ),
    Effect.provide(BunContext.layer),
    BunRuntime.runMain({
      disableErrorReporting: true,
      disablePrettyLogger: true,
      teardown: (exit, onExit) =>
        onExit(Exit.isFailure(exit) && (interrupted !== undefined || !Cause.isInterruptedOnly(exit.cause)) ? 1 : 0)
    })
  )
