import { Cause, Effect, Layer, Option, Predicate, Result, Schedule } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql"
import { isSqlError, type SqlError, UnknownError } from "effect/sql/SqlError"
import { accessSync, constants, existsSync, mkdirSync, statSync } from "node:fs"
import { dirname } from "node:path"
import { AppConfig, databaseUrlProblem, defaultDatabaseUrl, sqliteFilename } from "../Config/AppConfig.js"
import { ObservabilityConfig } from "../Observability/ObservabilityConfig.js"
import { databaseWords, driverCode, isCode, sqlError } from "./DatabaseErrors.js"
import { runMigrations } from "./Migrations.js"
import * as SqliteClient from "./SqliteClient.js"
import { startStatementSpan, withTransactionSpans } from "./StatementSpans.js"
import { statementDurations, statementFailures } from "./StatementTiming.js"

/** Set once the file is known intact (docs/architecture.md says why each). */
const pragmas = [
  "PRAGMA journal_mode = WAL",
  "PRAGMA synchronous = NORMAL",
  "PRAGMA busy_timeout = 0",
  "PRAGMA foreign_keys = ON"
]

/** The SQLite database `DATABASE_URL` names, migrated; a lock held past the statement timeout is busy (a 503). */
export const SqliteConnection: Layer.Layer<SqlClient.SqlClient, Error, AppConfig> = Layer.effect(
  SqlClient.SqlClient,
  Effect.gen(function*() {
    const { databaseStatementTimeout, databaseUrl } = yield* AppConfig
    const filename = sqliteFilename(databaseUrl)
    yield* checkWritable(databaseUrl, filename)
    const observability = yield* Effect.serviceOption(ObservabilityConfig)
    const timed = Option.exists(observability, ({ metrics }) => Option.isSome(metrics))
    const traced = Option.exists(observability, ({ tracing }) => Option.isSome(tracing))
    let lost: string | undefined
    return yield* Effect.gen(function*() {
      const sql: SqlClient.SqlClient = yield* SqliteClient.make({
        filename,
        // Turned on below, once the file is known to be intact: turning it on writes to it.
        disableWAL: true,
        beginTransaction: "BEGIN IMMEDIATE",
        lockWait: databaseStatementTimeout,
        unusable: () => lost,
        timer: timed ? statementDurations("sqlite") : undefined,
        onFailure: timed ? statementFailures("sqlite") : undefined,
        onRun: traced ? (text) => startStatementSpan("sqlite", text) : undefined
      })
      yield* checkIntact(sql)
      for (const pragma of pragmas) yield* sql.unsafe(pragma)
      yield* watchFile(filename, (reason) => (lost = reason))
      yield* Effect.provideService(runMigrations, SqlClient.SqlClient, sql)
      return traced ? withTransactionSpans(sql, "sqlite") : sql
    }).pipe(Effect.catchCause((cause) => Effect.fail(cannotUse(filename, Cause.squash(cause)))))
  })
).pipe(Layer.provide(Reactivity.layer))

/** Refuses a damaged file before anything is written to it; one damaged later is met as `SQLITE_CORRUPT` (503). */
const checkIntact = (sql: SqlClient.SqlClient) =>
  Effect.flatMap(sql.unsafe("PRAGMA quick_check(1)").values, (rows) => {
    const finding = String(rows[0]?.[0] ?? "no answer")
    if (finding === "ok") return Effect.void
    const message = `database disk image is malformed: ${finding}`
    const cause = Object.assign(new Error(message), { code: "SQLITE_CORRUPT" })
    return Effect.fail(sqlError(UnknownError, message, "quick_check", cause))
  })

const statOf = (filename: string) => Result.getOrUndefined(Result.try(() => statSync(filename)))

/** Deleted, renamed or replaced, the open file would take writes no later start reads: refused from then on (503). */
const watchFile = (filename: string, onLost: (reason: string) => void) => {
  const opened = statOf(filename)
  if (opened === undefined) return Effect.void
  const gone = Effect.suspend(() => {
    const now = statOf(filename)
    if (now !== undefined && now.ino === opened.ino && now.dev === opened.dev) return Effect.succeed(false)
    const reason = `The database file ${filename} was ${now === undefined ? "deleted or moved" : "replaced"} ` +
      "while the service was running; nothing more is written until the service is restarted on the file it should use"
    onLost(reason)
    return Effect.as(Effect.logError(reason), true)
  })
  return Effect.forkScoped(Effect.repeat(gone, { schedule: Schedule.spaced("250 millis"), until: (lost) => lost }))
}

const reason = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

const checking = (problem: string, check: () => unknown) =>
  Effect.try({ try: check, catch: (cause) => new Error(`${problem}: ${reason(cause)}`) })

/** Refuses a database the service could read but not write; a missing folder other than the default's is a mistyped path. */
const checkWritable = (databaseUrl: string, filename: string) =>
  Effect.gen(function*() {
    const folder = dirname(filename)
    // Again for a URL not the default's: a configuration composed in code (AppConfig.make) is not read through its rule.
    const problem = databaseUrl === defaultDatabaseUrl ? undefined : databaseUrlProblem(databaseUrl)
    if (problem !== undefined) return yield* Effect.fail(new Error(`DATABASE_URL ${problem}`))
    const create = () => databaseUrl === defaultDatabaseUrl && mkdirSync(folder, { recursive: true })
    yield* checking(`Cannot create the folder ${folder} of the database`, create)
    yield* checking(
      `The folder ${folder} of the database is not writable (SQLite keeps its WAL beside the file)`,
      () => accessSync(folder, constants.W_OK)
    )
    yield* checking(`The database ${filename} is read-only or unreadable; it was left untouched`, () => {
      if (existsSync(filename)) accessSync(filename, constants.R_OK | constants.W_OK)
    })
  })

const hints: ReadonlyArray<readonly [codes: ReadonlyArray<string>, hint: string]> = [
  [["SQLITE_NOTADB", "SQLITE_CORRUPT"], "it is not a SQLite database, or it is damaged"],
  [["SQLITE_FULL"], "the disk is full"],
  [["SQLITE_READONLY"], "it is read-only"]
]

/** The SQLite failure beneath the one met (a migration's failure carries its statement's). */
const sqlErrorIn = (error: unknown): SqlError | undefined =>
  isSqlError(error) ? error : Predicate.hasProperty(error, "cause") && isSqlError(error.cause) ? error.cause : undefined

const cannotUse = (filename: string, failure: unknown) => {
  const error = sqlErrorIn(failure)
  const code = error === undefined ? undefined : driverCode(error)
  const hint = hints.find(([codes]) => codes.some((known) => isCode(code, known)))?.[1]
  const words = error === undefined ? reason(failure) : databaseWords(error)
  const hinted = hint === undefined ? "" : ` (${hint})`
  return new Error(`Cannot use the database ${filename}${hinted}: ${words}. Nothing in it was changed.`)
}
