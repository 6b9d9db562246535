import {
  Cause,
  Config,
  Console,
  Effect,
  Exit,
  FileSystem,
  Layer,
  Path,
  Predicate,
  Runtime,
  Schema,
  SchemaIssue,
  Stdio,
  Terminal
} from "effect"
import { CliConfig, CliError, CliOutput, type Command, GlobalFlag } from "effect/cli"
import { HttpClientError } from "effect/http"
import { ChildProcessSpawner } from "effect/process"
import { summarizeCause } from "../Observability/CauseSummary.js"

/** Colours only on a terminal, and never with NO_COLOR set (https://no-color.org). */
const colours = process.stdout.isTTY === true && (process.env["NO_COLOR"] ?? "") === ""

const unused = Effect.die(new Error("not available to this command line"))

// What `effect/cli` runs with, where a platform package would give it: the arguments; the rest, for prompts, refuses.
const environment = Layer.mergeAll(
  Stdio.layerTest({ args: Effect.sync(() => process.argv.slice(2)) }),
  Path.layer,
  FileSystem.layerNoop({}),
  Layer.succeed(
    Terminal.Terminal,
    Terminal.make({
      columns: unused,
      rows: unused,
      size: unused,
      readInput: unused,
      readLine: unused,
      display: () => unused
    })
  ),
  Layer.succeed(ChildProcessSpawner.ChildProcessSpawner, ChildProcessSpawner.make(() => unused)),
  CliConfig.layer({ builtIns: GlobalFlag.BuiltIns.filter((flag) => flag !== GlobalFlag.Wizard) }),
  // Help, and the version alone as `--version` has always printed it; a mistaken invocation's error is `run`'s line.
  CliOutput.layerPresenter({
    present: (event) =>
      event._tag === "Help"
        ? Console.log(CliOutput.defaultFormatter({ colors: colours }).formatHelpDoc(event.helpDoc))
        : event._tag === "Version"
        ? Console.log(event.version)
        : Effect.void
  })
)

const oneLine = (text: string) => text.replace(/\s+/g, " ").trim()

// A missing option worded as the command lines have always said it.
const describeCliError = (error: CliError.CliError): string =>
  error._tag === "ShowHelp"
    ? error.errors.length === 0 ? "" : describeCliError(error.errors[0]!)
    : error._tag === "MissingOption"
    ? `Expected to find option: '--${error.option}'`
    : oneLine(error.message)

/** One line for a failure: the field (as `fields` names its option, `--category-id`), where in it, and the rule. */
export const describeFailure = (error: unknown, fields: Readonly<Record<string, string>>): string => {
  if (CliError.isCliError(error)) return describeCliError(error)
  // Named by the variable, not by an option.
  if (error instanceof Config.ConfigError) return describeFailure(error.cause, {})
  if (Schema.isSchemaError(error)) {
    const issue = SchemaIssue.makeFormatterStandardSchemaV1({
      leafHook: (leaf) => leaf._tag === "MissingKey" ? "must be set" : SchemaIssue.defaultLeafHook(leaf)
    })(error.issue).issues[0]
    if (issue === undefined) return oneLine(error.message)
    const [head, ...within] = issue.path ?? []
    if (head === undefined) return issue.message
    const field = String(head)
    // Inside a field (an item of a list, a key of an object): where, after the option's name.
    const where = within.length === 0
      ? ""
      : ` (${within.map((key) => (typeof key === "number" ? `value ${key + 1}` : String(key))).join(", ")})`
    return `${fields[field] ?? field}${where}: ${issue.message}`
  }
  if (HttpClientError.isHttpClientError(error)) {
    const { reason, request: { url } } = error
    if (reason._tag === "TransportError") {
      const cause = Predicate.hasProperty(reason.cause, "code") ? ` (${String(reason.cause.code)})` : ""
      return `base URL: nothing answers at ${new URL(url).origin}${cause}; set --base-url or PETSTORE_BASE_URL`
    }
    if (error.response !== undefined) return `${url}: unexpected answer with status ${error.response.status}`
    return `${url}: ${error.message}`
  }
  if (Predicate.hasProperty(error, "message") && typeof error.message === "string") return error.message.split("\n")[0]!
  return String(error)
}

/** `--help`: the library ends its run with a ShowHelp failure that carries no error. */
const isHelpOnly = (error: unknown) =>
  CliError.isCliError(error) && error._tag === "ShowHelp" && error.errors.length === 0

// A command line's program run: each error one line on stderr and exit 1, help exit 0. With `interrupted`, a signal's
// stop exits 1 with its line within `withinMillis`, whatever the program's clean-up still waits for.
export const run = <E>(
  program: Effect.Effect<void, E, Command.Environment>,
  fields: Readonly<Record<string, string>> = {},
  interrupted?: { readonly line: () => string; readonly withinMillis: number }
) => {
  let told = false
  const tell = () => {
    if (told || interrupted === undefined) return
    told = true
    process.stderr.write(`${interrupted.line()}\n`)
  }
  // Unref'd: a stop that ends in time exits on its own, with its own code.
  const arm = () => {
    if (interrupted === undefined) return
    setTimeout(() => {
      tell()
      process.exit(1)
    }, interrupted.withinMillis).unref()
  }
  const main = program.pipe(
    Effect.catchIf(isHelpOnly, () => Effect.void),
    Effect.onInterrupt(() => Effect.sync(tell)),
    Effect.tapCause((cause) => {
      if (Cause.hasInterruptsOnly(cause)) return Effect.void
      const failure = Cause.findErrorOption(cause)
      const message = failure._tag === "Some" ? describeFailure(failure.value, fields) : summarizeCause(cause)
      return message === "" ? Effect.void : Effect.sync(() => process.stderr.write(`${message}\n`))
    }),
    Effect.provide(environment)
  )
  runMainOn(["SIGINT", "SIGTERM"], arm)(main, {
    disableErrorReporting: true,
    teardown: (exit, onExit) =>
      onExit(Exit.isSuccess(exit) || (Cause.hasInterruptsOnly(exit.cause) && interrupted === undefined) ? 0 : 1)
  })
}

/** The main fiber run until it ends or `signals` interrupt it, as the platform's `runMain` (which does not load). */
export const runMainOn = (signals: ReadonlyArray<NodeJS.Signals>, onEachSignal: () => void) =>
  Runtime.makeRunMain(({ fiber, teardown }) => {
    let receivedSignal = false
    const onSignal = () => {
      receivedSignal = true
      onEachSignal()
      fiber.interruptUnsafe(fiber.id)
    }
    fiber.addObserver((exit) => {
      for (const signal of signals) process.removeListener(signal, onSignal)
      teardown(exit, (code) => {
        if (receivedSignal || code !== 0) process.exit(code)
      })
    })
    for (const signal of signals) process.on(signal, onSignal)
  })
