import { Console, Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { integerOption, switchOption } from "../CommandLine/Options.js"
import { run } from "../CommandLine/Run.js"
import { databaseUrlSetting } from "../Config/AppConfig.js"
import { backup, restore } from "../Move/Backup.js"
import { copy } from "../Move/Copy.js"
import { lastId, restoreIds } from "../Move/Ids.js"
import { Deadlines, deadlinesConfig } from "../Move/PostgresSession.js"
import { readOnly, status } from "../Move/SchemaVersion.js"
import { defaultStore, interruption, MoveError, parseStore, passwordOf, type Store } from "../Move/Store.js"
import { verify } from "../Move/Verify.js"

const warn = (line: string) => Effect.sync(() => process.stderr.write(`${line}\n`))

/** A side of a move, or the name of an environment variable holding it, which keeps a password out of ps and history. */
const sideOptions = (name: string, description: string) => ({
  value: Flag.String(name).pipe(Flag.withDescription(description), Flag.optional),
  env: Flag.String(`${name}-env`).pipe(
    Flag.withMetavar("NAME"),
    Flag.withDescription(`The environment variable holding ${description.toLowerCase()}`),
    Flag.optional
  )
})

type Side = { readonly value: Option.Option<string>; readonly env: Option.Option<string> }

const resolveSide = (name: string, side: Side, fallback?: Effect.Effect<Store, unknown>) => {
  const fail = (message: string) => Effect.fail(new MoveError({ message }))
  if (Option.isSome(side.value) && Option.isSome(side.env)) return fail(`--${name} and --${name}-env: give one of them`)
  if (Option.isSome(side.value)) {
    return Effect.tap(
      parseStore(side.value.value, `--${name}`),
      (store) =>
        store.engine === "postgres" && passwordOf(store.url) !== ""
          ? warn(
            `warning: --${name} holds a password, which other users see in ps while the command runs and the shell's ` +
              `history keeps; put the URL in an environment variable and give its name with --${name}-env`
          )
          : Effect.void
    )
  }
  if (Option.isSome(side.env)) {
    const value = process.env[side.env.value] ?? ""
    return value === ""
      ? fail(`--${name}-env: the environment variable ${side.env.value} is not set`)
      : parseStore(value, side.env.value)
  }
  return fallback ?? fail(`--${name} or --${name}-env: must be given`)
}

/** The store `DATABASE_URL` (or the file `DATABASE_URL_FILE`) names; the service's default when neither is set. */
const databaseUrlStore = Effect.flatMap(
  databaseUrlSetting,
  Option.match({
    onNone: () => Effect.succeed(defaultStore),
    onSome: ({ file, url }) => parseStore(url, file === undefined ? "DATABASE_URL" : `DATABASE_URL_FILE (${file})`)
  })
)

const database = sideOptions(
  "database",
  "The database (a SQLite path or a postgres:// URL); DATABASE_URL's when absent"
)
const from = sideOptions("from", "The source database (a SQLite path or a postgres:// URL)")
const to = sideOptions("to", "The target database (a SQLite path or a postgres:// URL)")

/** A subcommand on one database, printing the lines `work` returns on stdout. */
const onDatabase = <const Config extends Command.Command.Config>(
  name: string,
  config: Config,
  work: (
    store: Store,
    options: Command.Command.Config.InferValue<Config>
  ) => Effect.Effect<string | number | ReadonlyArray<string>, unknown>,
  description: string
) =>
  Command.make(
    name,
    { options: config, database },
    ({ database, options }) =>
      Effect.flatMap(resolveSide("database", database, databaseUrlStore), (store) => work(store, options)).pipe(
        Effect.flatMap((lines) => Console.log(typeof lines === "object" ? lines.join("\n") : lines))
      )
  ).pipe(Command.withDescription(description))

const copyCommand = Command.make("copy", { from, to }, (options) =>
  Effect.gen(function*() {
    const source = yield* resolveSide("from", options.from)
    const { lines, note } = yield* copy(source, yield* resolveSide("to", options.to))
    yield* Console.log(lines.join("\n"))
    if (note !== undefined) yield* warn(note)
  })).pipe(Command.withDescription(
    "Copy everything the service keeps into an empty database, built from this build's migrations, and verify it"
  ))

const verifyCommand = Command.make("verify", { from, to }, (options) =>
  Effect.gen(function*() {
    const source = yield* resolveSide("from", options.from)
    const result = yield* verify(source, yield* resolveSide("to", options.to))
    yield* Console.log(result.lines.join("\n"))
    if (result.differing.length > 0) {
      return yield* new MoveError({
        message: `verification failed: ${result.differing.join(", ")} differ between source and target`
      })
    }
    yield* Console.log(`verified in ${result.seconds.toFixed(1)} s: every table has the same rows`)
  })).pipe(Command.withDescription("Compare every table's row count and checksum on both databases, without copying"))

const db = Command.make("db").pipe(
  Command.withSubcommands([
    copyCommand,
    verifyCommand,
    onDatabase("status", {}, status, "Show the database's engine, schema version, read-only mode and rows per table"),
    onDatabase(
      "read-only",
      { state: Argument.ChoiceWithValue("on|off", [["on", true], ["off", false]]) },
      (store, { state }) => readOnly(store, state),
      "Stop (on) or allow again (off) writes on the database, for a move; instances notice within a second"
    ),
    onDatabase(
      "backup",
      { file: Argument.String("FILE") },
      (store, { file }) => backup(store, file),
      "Write a consistent copy of the SQLite database to FILE while the service serves and writes"
    ),
    onDatabase(
      "restore",
      {
        file: Argument.String("BACKUP"),
        idsMayRepeat: switchOption("ids-may-repeat").pipe(Flag.withDescription(
          "Restore even where the replaced file is gone or cannot be read: ids it handed out since the backup may then be handed out again"
        ))
      },
      (store, { file, idsMayRepeat }) => restore(store, file, { idsMayRepeat }),
      "Put back a SQLite backup made by db backup, the service stopped; the next ids stay above every id the replaced file handed out"
    ),
    onDatabase(
      "last-id",
      {},
      lastId,
      "Print the highest id the database has handed out, for db restore-ids --above after a restore replaces it"
    ),
    onDatabase(
      "restore-ids",
      {
        above: integerOption("above").pipe(
          Flag.withDescription("The highest id the replaced database handed out (db last-id)")
        )
      },
      (store, { above }) => restoreIds(store, above),
      "Set the restored database's id sequences above --above, so that no id is handed out twice"
    )
  ]),
  Command.withDescription(
    "Move the Pet Store's data between SQLite and PostgreSQL, verify it, back it up and restore it"
  )
)

run(
  Command.run(db, { version: "1.0.0" }).pipe(Effect.provideServiceEffect(Deadlines, deadlinesConfig)),
  {},
  // The first Ctrl-C ends the command within 2 s with its line, whatever it waits for; 1.5 s leaves the exit room.
  { line: () => interruption.line, withinMillis: 1_500 }
)
