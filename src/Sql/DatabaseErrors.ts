import { Effect, Predicate } from "effect"
import { ConnectionError, SqlError, type SqlErrorReason, type UniqueViolation } from "effect/sql/SqlError"
import { DatabaseUnavailable } from "../Domain/DatabaseUnavailable.js"

type Unavailability = DatabaseUnavailable["reason"]

type Reason = new(
  props: { readonly cause: unknown; readonly message: string; readonly operation: string }
) => SqlErrorReason

/** A failure as effect/sql reports one, for those the service finds itself (a timer run out, a check failed). */
export const sqlError = (Reason: Reason, message: string, operation: string, cause: unknown = new Error(message)) =>
  new SqlError({ reason: new Reason({ cause, message, operation }) })

export const connectionError = (message: string, operation: string) => sqlError(ConnectionError, message, operation)

/** The code the driver put on a failure: PostgreSQL's SQLSTATE, a socket's errno, or SQLite's result code. */
export const driverCode = ({ reason: { cause } }: SqlError): string | undefined =>
  Predicate.hasProperty(cause, "code") && typeof cause.code === "string" ? cause.code : undefined

/** Whether `code` is `known` or one of SQLite's extended codes of it (`SQLITE_READONLY_DBMOVED`). */
export const isCode = (code: string | undefined, known: string): boolean =>
  code === known || code?.startsWith(`${known}_`) === true

/** What an `UnknownError`'s code means; the engines report these with no reason of their own. */
const byCode: ReadonlyArray<readonly [Unavailability, ReadonlyArray<string>]> = [
  // PostgreSQL shut down, crashed or starting, an idle transaction ended, out of connections or memory.
  ["unavailable", ["57P01", "57P02", "57P03", "25P03", "53300", "53200"]],
  // SQLite's file unreadable or damaged.
  ["unavailable", ["SQLITE_IOERR", "SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_CANTOPEN"]],
  ["full", ["53100", "SQLITE_FULL"]],
  ["read_only", ["25006", "SQLITE_READONLY"]]
]

const unavailabilityOf = (error: SqlError): Unavailability | undefined => {
  const tag = error.reason._tag
  if (tag === "ConnectionError") return "unavailable"
  if (tag === "LockTimeoutError" || tag === "StatementTimeoutError") return "busy"
  const code = tag === "UnknownError" ? driverCode(error) : undefined
  return byCode.find(([, codes]) => codes.some((known) => isCode(code, known)))?.[0]
}

/** Whether `error` is the database refusing a write (PostgreSQL's `25006`, a standby's too, or SQLite's). */
export const isReadOnly = (error: SqlError): boolean => unavailabilityOf(error) === "read_only"

/** The database's own words: the driver's error beneath the reason, else the reason's message. */
export const databaseWords = ({ reason }: SqlError): string => {
  const cause: unknown = reason.cause
  const words = Predicate.hasProperty(cause, "message") && typeof cause.message === "string" ? cause.message : ""
  return words !== "" ? words : reason.message ?? reason._tag
}

export const toUnavailable = (error: SqlError): DatabaseUnavailable | undefined => {
  const reason = unavailabilityOf(error)
  return reason === undefined ? undefined : new DatabaseUnavailable({ reason, message: databaseWords(error) })
}

/** `error` with the database's words in the message a log shows (`@effect/sql-pg` says only "Query failed"). */
const withDatabaseWords = (error: SqlError): SqlError => {
  const { reason } = error
  const words = databaseWords(error)
  const said = reason.message ?? reason._tag
  if (said.includes(words)) return error
  // Remade by its own class, so that the log names the reason the driver gave.
  const Reason = reason.constructor as new(props: Partial<UniqueViolation>) => SqlErrorReason
  const constraint = reason._tag === "UniqueViolation" ? { constraint: reason.constraint } : {}
  const { cause, operation } = reason
  return new SqlError({ reason: new Reason({ cause, message: `${said}: ${words}`, operation, ...constraint }) })
}

/** A statement's failure as the stores report it: `DatabaseUnavailable`, or a defect (a fault of the statement). */
export const unavailableOrDie = <A, R>(self: Effect.Effect<A, SqlError, R>): Effect.Effect<A, DatabaseUnavailable, R> =>
  Effect.catch(self, (error) => {
    const unavailable = toUnavailable(error)
    return unavailable === undefined ? Effect.die(withDatabaseWords(error)) : Effect.fail(unavailable)
  })
