import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlClient } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import { Cause, Duration, Effect, Layer, Option, Predicate, Schedule } from "effect"
import { accessSync, constants, existsSync, mkdirSync, statSync } from "node:fs"
import { dirname } from "node:path"
import { AppConfig, sqliteFilename } from "../Config/AppConfig.js"
import { ObservabilityConfig } from "../Observability/ObservabilityConfig.js"
import { runMigrations } from "./Migrations.js"
import { makeSqliteClient } from "./SqliteStatements.js"

/**
 * Set on the connection once the file is known to be intact: the WAL, and a commit that does not
 * wait for fsync (the WAL keeps it durable across a process crash), no busy timeout
 * (SQLite's would wait for another writer inside a synchronous call; `makeSqliteClient` waits in
 * Effect instead), and foreign keys enforced.
 */
const pragmas = ["PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL", "PRAGMA busy_timeout = 0", "PRAGMA foreign_keys = ON"]

/**
 * The SQLite database `DATABASE_URL` names, as the `SqlClient` every store runs on: the file
 * checked before SQLite touches it, its folder created on first start, the numbered migrations
 * applied before anything is served. A failure to open it names the file and SQLite's reason.
 */
export const SqliteConnection: Layer.Layer<SqlClient.SqlClient, Error, AppConfig> = Layer.scoped(
  SqlClient.SqlClient,
  Effect.gen(function*() {
    const { databaseStatementTimeout, databaseUrl } = yield* AppConfig
    const filename = sqliteFilename(databaseUrl)
    yield* Effect.try({ try: () => checkWritable(filename), catch: (cause) => cause as Error })
    const observability = yield* Effect.serviceOption(ObservabilityConfig)
    const timed = Option.exists(observability, ({ metrics }) => Option.isSome(metrics))
    return yield* open(filename, { timed, lockWait: databaseStatementTimeout }).pipe(
      Effect.catchAllCause((cause) => Effect.fail(cannotUse(filename, reasonOf(cause))))
    )
  })
)

const open = (filename: string, options: { readonly timed: boolean; readonly lockWait: Duration.Duration }) =>
  Effect.gen(function*() {
    // WAL is turned on below, once the file is known to be intact: turning it on writes to it.
    const driver = yield* SqliteClient.make({ filename, disableWAL: true })
    // The driver's one connection, held by this layer from now on: every statement goes through
    // the client below, which serialises transactions itself.
    const connection = yield* driver.reserve
    yield* checkIntact(connection)
    for (const pragma of pragmas) yield* connection.executeRaw(pragma, [])
    const file = yield* watchFile(filename)
    const sql = yield* makeSqliteClient(connection, { ...options, unusable: file.lost })
    yield* Effect.provideService(runMigrations, SqlClient.SqlClient, sql)
    return sql
  }).pipe(Effect.provide(Reactivity.layer))

/**
 * Refuses a damaged file before anything is written to it: SQLite's own check of every page and
 * b-tree (`PRAGMA quick_check`, about 0.25 s per million pets), whose first finding is the reason
 * given. A file damaged later is met at run time as `SQLITE_CORRUPT`, answered 503.
 */
const checkIntact = (connection: Connection) =>
  Effect.flatMap(connection.executeValues("PRAGMA quick_check(1)", []), (rows) => {
    const finding = String(rows[0]?.[0] ?? "no answer")
    return finding === "ok"
      ? Effect.void
      : Effect.fail(new SqlError({ message: `database disk image is malformed: ${finding}`, cause: new Error(`database disk image is malformed: ${finding}`) }))
  })

/**
 * Watches the file the connection has open. Deleted, renamed or replaced under the running
 * service, the open connection would go on writing into a file no later start will read: from
 * the moment it is noticed (a `stat` every 250 ms, comparing the file's inode), every statement is
 * refused, so writes answer 503 and `/readyz` 503, and an error names the file once.
 */
const watchFile = (filename: string) =>
  Effect.gen(function*() {
    let lost: string | undefined
    const opened = statOf(filename)
    if (opened === undefined) return { lost: () => lost }
    const check = Effect.suspend(() => {
      const now = statOf(filename)
      if (now !== undefined && now.ino === opened.ino && now.dev === opened.dev) return Effect.void
      lost = `The database file ${filename} was ${now === undefined ? "deleted or moved" : "replaced"} while the service was running; ` +
        "nothing more is written until the service is restarted on the file it should use"
      return Effect.logError(lost)
    })
    yield* check.pipe(
      Effect.repeat({ schedule: Schedule.spaced("250 millis"), until: () => lost !== undefined }),
      Effect.forkScoped
    )
    return { lost: () => lost }
  })

const statOf = (filename: string) => {
  try {
    return statSync(filename)
  } catch {
    return undefined
  }
}

/**
 * Refuses, before SQLite touches anything, a database the service could read but not write: the
 * folder is created if missing, and it and the file must be writable (WAL and journal files live
 * beside the database).
 */
const checkWritable = (filename: string) => {
  const folder = dirname(filename)
  try {
    mkdirSync(folder, { recursive: true })
  } catch (cause) {
    throw new Error(`Cannot create the folder ${folder} of the database: ${reason(cause)}`)
  }
  try {
    accessSync(folder, constants.W_OK)
  } catch (cause) {
    throw new Error(`The folder ${folder} of the database is not writable (SQLite keeps its WAL beside the file): ${reason(cause)}`)
  }
  if (!existsSync(filename)) return
  try {
    accessSync(filename, constants.R_OK | constants.W_OK)
  } catch (cause) {
    throw new Error(`The database ${filename} is read-only or unreadable; it was left untouched: ${reason(cause)}`)
  }
}

const reason = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

/** SQLite's own words for a failure, beneath `@effect/sql`'s wrapping of them. */
const reasonOf = (cause: Cause.Cause<unknown>): string => {
  let error: unknown = Cause.squash(cause)
  while (Predicate.hasProperty(error, "cause") && error.cause !== undefined && Predicate.hasProperty(error, "_tag")) {
    error = error.cause
  }
  return reason(error)
}

const hints: ReadonlyArray<readonly [RegExp, string]> = [
  [/not a database|malformed/i, "it is not a SQLite database, or it is damaged"],
  [/disk is full|SQLITE_FULL/i, "the disk is full"],
  [/readonly|read-only/i, "it is read-only"]
]

const cannotUse = (filename: string, message: string) => {
  const hint = hints.find(([pattern]) => pattern.test(message))?.[1]
  return new Error(
    `Cannot use the database ${filename}${hint === undefined ? "" : ` (${hint})`}: ${message}. Nothing in it was changed.`
  )
}
