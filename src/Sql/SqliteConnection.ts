import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import { Cause, Effect, Layer, Option, Predicate } from "effect"
import { accessSync, constants, existsSync, mkdirSync } from "node:fs"
import { dirname } from "node:path"
import { AppConfig, sqliteFilename } from "../Config/AppConfig.js"
import { ObservabilityConfig } from "../Observability/ObservabilityConfig.js"
import { runMigrations } from "./Migrations.js"
import { makeSqliteClient } from "./SqliteStatements.js"

/**
 * Set on the connection before anything else: a commit does not wait for fsync (the WAL, which
 * `@effect/sql-sqlite-bun` turns on, keeps it durable across a process crash), a busy timeout for
 * other writers, and foreign keys enforced.
 */
const pragmas = ["PRAGMA synchronous = NORMAL", "PRAGMA busy_timeout = 5000", "PRAGMA foreign_keys = ON"]

/**
 * The SQLite database `DATABASE_URL` names, as the `SqlClient` every store runs on: the file
 * checked before SQLite touches it, its folder created on first start, the numbered migrations
 * applied before anything is served. A failure to open it names the file and SQLite's reason.
 */
export const SqliteConnection: Layer.Layer<SqlClient.SqlClient, Error, AppConfig> = Layer.scoped(
  SqlClient.SqlClient,
  Effect.gen(function*() {
    const { databaseUrl } = yield* AppConfig
    const filename = sqliteFilename(databaseUrl)
    yield* Effect.try({ try: () => checkWritable(filename), catch: (cause) => cause as Error })
    const observability = yield* Effect.serviceOption(ObservabilityConfig)
    const timed = Option.exists(observability, ({ metrics }) => Option.isSome(metrics))
    return yield* open(filename, timed).pipe(
      Effect.catchAllCause((cause) => Effect.fail(cannotUse(filename, reasonOf(cause))))
    )
  })
)

const open = (filename: string, timed: boolean) =>
  Effect.gen(function*() {
    const driver = yield* SqliteClient.make({ filename })
    // The driver's one connection, held by this layer from now on: every statement goes through
    // the client below, which serialises transactions itself.
    const connection = yield* driver.reserve
    for (const pragma of pragmas) yield* connection.executeRaw(pragma, [])
    const sql = yield* makeSqliteClient(connection, timed)
    yield* Effect.provideService(runMigrations, SqlClient.SqlClient, sql)
    return sql
  }).pipe(Effect.provide(Reactivity.layer))

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
