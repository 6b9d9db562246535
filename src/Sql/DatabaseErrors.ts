import { Effect, Predicate } from "effect"
import {
  AuthenticationError,
  AuthorizationError,
  ConnectionError,
  ConstraintError,
  DeadlockError,
  LockTimeoutError,
  SerializationError,
  SqlError,
  type SqlErrorReason,
  SqlSyntaxError,
  StatementTimeoutError,
  UniqueViolation,
  UnknownError
} from "effect/sql/SqlError"
import { DatabaseUnavailable } from "../Domain/DatabaseUnavailable.js"

type Unavailability = DatabaseUnavailable["reason"]

/**
 * Failures the engines report without a reason of their own (`UnknownError`), told apart by the
 * code the driver put on the error: PostgreSQL's SQLSTATE or SQLite's result code.
 */
const byCode: ReadonlyArray<readonly [code: string, Unavailability]> = [
  // PostgreSQL: shut down or crashed, starting, idle transaction ended, out of connections or memory.
  ["57P01", "unavailable"],
  ["57P02", "unavailable"],
  ["57P03", "unavailable"],
  ["25P03", "unavailable"],
  ["53300", "unavailable"],
  ["53200", "unavailable"],
  ["53100", "full"],
  ["25006", "read_only"],
  // SQLite: the disk full, the file read-only, unreadable or damaged.
  ["SQLITE_FULL", "full"],
  ["SQLITE_READONLY", "read_only"],
  ["SQLITE_IOERR", "unavailable"],
  ["SQLITE_CORRUPT", "unavailable"],
  ["SQLITE_NOTADB", "unavailable"],
  ["SQLITE_CANTOPEN", "unavailable"]
]

const codeOf = (cause: unknown): string | undefined =>
  Predicate.hasProperty(cause, "code") && typeof cause.code === "string" ? cause.code : undefined

/** SQLite's extended codes (`SQLITE_READONLY_DBMOVED`) belong to their primary one. */
const unavailabilityOfCode = (code: string): Unavailability | undefined =>
  byCode.find(([known]) => code === known || code.startsWith(`${known}_`))?.[1]

const unavailabilityOf = (reason: SqlErrorReason): Unavailability | undefined => {
  switch (reason._tag) {
    case "ConnectionError":
      return "unavailable"
    case "LockTimeoutError":
    case "StatementTimeoutError":
      return "busy"
    case "UnknownError": {
      const code = codeOf(reason.cause)
      return code === undefined ? undefined : unavailabilityOfCode(code)
    }
    default:
      return undefined
  }
}

/** Whether `error` is the database refusing a write: read-only (PostgreSQL's `25006`, a standby's too) or SQLite's file. */
export const isReadOnly = (error: SqlError): boolean => unavailabilityOf(error.reason) === "read_only"

/** The database's own words: the driver's error beneath the reason, else the reason's message. */
export const databaseWords = (error: SqlError): string => {
  const cause: unknown = error.reason.cause
  if (Predicate.hasProperty(cause, "message") && typeof cause.message === "string" && cause.message !== "") {
    return cause.message
  }
  return error.reason.message ?? error.reason._tag
}

/** `error` as a `DatabaseUnavailable` when it means the database cannot serve now, else undefined. */
export const toUnavailable = (error: SqlError): DatabaseUnavailable | undefined => {
  const reason = unavailabilityOf(error.reason)
  return reason === undefined ? undefined : new DatabaseUnavailable({ reason, message: databaseWords(error) })
}

const reasons = {
  AuthenticationError,
  AuthorizationError,
  ConnectionError,
  ConstraintError,
  DeadlockError,
  LockTimeoutError,
  SerializationError,
  SqlSyntaxError,
  StatementTimeoutError,
  UnknownError
} as const

/**
 * `error` with the database's own words in its message, which is what a log line of it shows
 * (`@effect/sql-pg` says only "PgConnection: Query failed"; its reason's cause has the words).
 */
export const withDatabaseWords = (error: SqlError): SqlError => {
  const { reason } = error
  const words = databaseWords(error)
  const said = reason.message ?? reason._tag
  if (said.includes(words)) return error
  const props = { cause: reason.cause, message: `${said}: ${words}`, operation: reason.operation }
  return new SqlError({
    reason: reason._tag === "UniqueViolation"
      ? new UniqueViolation({ ...props, constraint: reason.constraint })
      : new reasons[reason._tag](props)
  })
}

/**
 * A statement's failure as the stores report it: `DatabaseUnavailable` when the database cannot
 * serve now, a defect otherwise (a fault of the statement, nothing a caller could handle).
 */
export const unavailableOrDie = <A, R>(self: Effect.Effect<A, SqlError, R>): Effect.Effect<A, DatabaseUnavailable, R> =>
  Effect.catch(self, (error) => {
    const unavailable = toUnavailable(error)
    return unavailable === undefined ? Effect.die(withDatabaseWords(error)) : Effect.fail(unavailable)
  })
