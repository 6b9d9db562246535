import { Cause, Duration, Effect, Layer, Option, Predicate, Schedule } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql"
import { isSqlError, SqlError, UnknownError } from "effect/sql/SqlError"
import { accessSync, constants, existsSync, mkdirSync, statSync } from "node:fs"
import { dirname } from "node:path"
import { AppConfig, databaseUrlProblem, defaultDatabaseUrl, sqliteFilename } from "../Config/AppConfig.js"
import { ObservabilityConfig } from "../Observability/ObservabilityConfig.js"
import { databaseWords } from "./DatabaseErrors.js"
import { runMigrations } from "./Migrations.js"
import * as SqliteClient from "./SqliteClient.js"
import { startStatementSpan, withTransactionSpans } from "./StatementSpans.js"
import { statementDurations, statementFailures } from "./StatementTiming.js"

/**
 * Set once the file is known to be intact: the WAL, and a commit that does not wait for fsync
 * (the WAL keeps it durable across a process crash), no busy timeout (SQLite's would wait for
 * another writer inside a synchronous call; the client waits in Effect instead), and foreign keys
 * enforced.
 */
const pragmas = [
  "PRAGMA journal_mode = WAL",
  "PRAGMA synchronous = NORMAL",
  "PRAGMA busy_timeout = 0",
  "PRAGMA foreign_keys = ON"
]

/**
 * The SQLite database `DATABASE_URL` names, as the `SqlClient` every store runs on: the file
 * checked before SQLite touches it, the default's folder created on first start, the numbered migrations
 * applied before anything is served. A transaction takes the write lock at its `BEGIN
 * IMMEDIATE`; a lock another process holds is waited for up to `DATABASE_STATEMENT_TIMEOUT_SECONDS`,
 * then the statement fails as busy (a 503). A failure to open names the file and SQLite's reason.
 */
export const SqliteConnection: Layer.Layer<SqlClient.SqlClient, Error, AppConfig> = Layer.effect(
  SqlClient.SqlClient,
  Effect.gen(function*() {
    const { databaseStatementTimeout, databaseUrl } = yield* AppConfig
    const filename = sqliteFilename(databaseUrl)
    yield* Effect.try({ try: () => checkWritable(databaseUrl, filename), catch: (cause) => cause as Error })
    const observability = yield* Effect.serviceOption(ObservabilityConfig)
    const timed = Option.exists(observability, ({ metrics }) => Option.isSome(metrics))
    const traced = Option.exists(observability, ({ tracing }) => Option.isSome(tracing))
    return yield* open(filename, { timed, traced, lockWait: databaseStatementTimeout }).pipe(
      Effect.catchCause((cause) => Effect.fail(cannotUse(filename, Cause.squash(cause))))
    )
  })
).pipe(Layer.provide(Reactivity.layer))

const open = (
  filename: string,
  options: { readonly timed: boolean; readonly traced: boolean; readonly lockWait: Duration.Duration }
) =>
  Effect.gen(function*() {
    let lost: string | undefined
    const sql = yield* SqliteClient.make({
      filename,
      // Turned on below, once the file is known to be intact: turning it on writes to it.
      disableWAL: true,
      beginTransaction: "BEGIN IMMEDIATE",
      lockWait: options.lockWait,
      unusable: () => lost,
      timer: options.timed ? statementDurations("sqlite") : undefined,
      onFailure: options.timed ? statementFailures("sqlite") : undefined,
      onRun: options.traced ? (text) => startStatementSpan("sqlite", text) : undefined
    })
    yield* checkIntact(sql)
    for (const pragma of pragmas) yield* sql.unsafe(pragma)
    yield* watchFile(filename, (reason) => {
      lost = reason
    })
    yield* Effect.provideService(runMigrations, SqlClient.SqlClient, sql)
    return options.traced ? withTransactionSpans(sql as SqlClient.SqlClient, "sqlite") : sql as SqlClient.SqlClient
  })

/**
 * Refuses a damaged file before anything is written to it: SQLite's own check of every page and
 * b-tree (`PRAGMA quick_check`, about 0.25 s per million pets), whose first finding is the reason
 * given. A file damaged later is met at run time as `SQLITE_CORRUPT`, answered 503.
 */
const checkIntact = (sql: SqlClient.SqlClient) =>
  Effect.flatMap(sql.unsafe("PRAGMA quick_check(1)").values, (rows) => {
    const finding = String(rows[0]?.[0] ?? "no answer")
    if (finding === "ok") return Effect.void
    const message = `database disk image is malformed: ${finding}`
    return Effect.fail(
      new SqlError({
        reason: new UnknownError({
          cause: Object.assign(new Error(message), { code: "SQLITE_CORRUPT" }),
          message,
          operation: "quick_check"
        })
      })
    )
  })

/**
 * Watches the file the connection has open. Deleted, renamed or replaced under the running
 * service, the open connection would go on writing into a file no later start will read: from
 * the moment it is noticed (a `stat` every 250 ms, comparing the file's inode), every statement is
 * refused, so writes answer 503 and `/readyz` 503, and an error names the file once.
 */
const watchFile = (filename: string, onLost: (reason: string) => void) =>
  Effect.gen(function*() {
    const opened = statOf(filename)
    if (opened === undefined) return
    let lost = false
    const check = Effect.suspend(() => {
      const now = statOf(filename)
      if (now !== undefined && now.ino === opened.ino && now.dev === opened.dev) return Effect.void
      const reason =
        `The database file ${filename} was ${
          now === undefined ? "deleted or moved" : "replaced"
        } while the service was running; ` +
        "nothing more is written until the service is restarted on the file it should use"
      lost = true
      onLost(reason)
      return Effect.logError(reason)
    })
    yield* check.pipe(
      Effect.repeat({ schedule: Schedule.spaced("250 millis"), until: () => lost }),
      Effect.forkScoped
    )
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
 * folder must exist (the default's is created, for a first start from a checkout; any other
 * missing one is a mistyped path, which would start an empty store), and it and the file must be
 * writable (WAL and journal files live beside the database).
 */
const checkWritable = (databaseUrl: string, filename: string) => {
  const folder = dirname(filename)
  if (databaseUrl === defaultDatabaseUrl) {
    try {
      mkdirSync(folder, { recursive: true })
    } catch (cause) {
      throw new Error(`Cannot create the folder ${folder} of the database: ${reason(cause)}`)
    }
  } else {
    // Again here: a configuration composed in code (AppConfig.make) is not read through its rule.
    const problem = databaseUrlProblem(databaseUrl)
    if (problem !== undefined) throw new Error(`DATABASE_URL ${problem}`)
  }
  try {
    accessSync(folder, constants.W_OK)
  } catch (cause) {
    throw new Error(
      `The folder ${folder} of the database is not writable (SQLite keeps its WAL beside the file): ${reason(cause)}`
    )
  }
  if (!existsSync(filename)) return
  try {
    accessSync(filename, constants.R_OK | constants.W_OK)
  } catch (cause) {
    throw new Error(`The database ${filename} is read-only or unreadable; it was left untouched: ${reason(cause)}`)
  }
}

const reason = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

/** What an operator can do about SQLite's refusal, by its result code. */
const hints: ReadonlyArray<readonly [code: string, hint: string]> = [
  ["SQLITE_NOTADB", "it is not a SQLite database, or it is damaged"],
  ["SQLITE_CORRUPT", "it is not a SQLite database, or it is damaged"],
  ["SQLITE_FULL", "the disk is full"],
  ["SQLITE_READONLY", "it is read-only"]
]

/** The SQLite failure beneath the one met (a migration's failure carries its statement's). */
const sqlErrorIn = (error: unknown): SqlError | undefined => {
  for (let depth = 0; depth < 5 && error !== undefined; depth++) {
    if (isSqlError(error)) return error
    error = Predicate.hasProperty(error, "cause") ? error.cause : undefined
  }
  return undefined
}

const cannotUse = (filename: string, failure: unknown) => {
  const error = sqlErrorIn(failure)
  if (error === undefined) {
    return new Error(`Cannot use the database ${filename}: ${reason(failure)}. Nothing in it was changed.`)
  }
  const cause: unknown = error.reason.cause
  const code = Predicate.hasProperty(cause, "code") ? String(cause.code) : ""
  const hint = hints.find(([known]) => code === known || code.startsWith(`${known}_`))?.[1]
  return new Error(
    `Cannot use the database ${filename}${hint === undefined ? "" : ` (${hint})`}: ${
      databaseWords(error)
    }. Nothing in it was changed.`
  )
}
