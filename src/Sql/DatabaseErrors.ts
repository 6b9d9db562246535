import { SqlError } from "@effect/sql/SqlError"
import { Cause, Option, Predicate } from "effect"

/**
 * A failed statement's error with the database's own words added to `@effect/sql`'s message
 * ("Failed to execute statement: database or disk is full"), so the log line of a failed request
 * says what the database said.
 */
export const withDatabaseReason = <E>(cause: Cause.Cause<E>): Cause.Cause<E> =>
  Cause.map(cause, (error) => {
    if (!(error instanceof SqlError) || !Predicate.hasProperty(error.cause, "message")) return error
    const reason = String(error.cause.message)
    return (error.message.endsWith(reason)
      ? error
      : new SqlError({ cause: error.cause, message: `${error.message}: ${reason}` })) as E
  })

/**
 * PostgreSQL's codes for a database that cannot serve now: its connection lost or refused, shut
 * down or starting, out of connections, a statement or idle transaction cut by its timeout, a
 * lock not had, a full disk, a read-only standby.
 */
const unavailableSqlStates = new Set([
  "08000", "08001", "08003", "08004", "08006", "25P03", "53100", "53200", "53300", "55P03",
  "57014", "57P01", "57P02", "57P03", "25006"
])

/** What the drivers say when the database cannot serve now (not a fault of the statement). */
const unavailableWords =
  /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|EHOSTUNREACH|ENETUNREACH|Connection terminated|connection timeout|timeout exceeded when trying to connect|Query read timeout|not queryable|Connection error|SQLITE_(BUSY|LOCKED|READONLY|FULL|IOERR|CANTOPEN|CORRUPT|NOTADB)|database is locked|database or disk is full|readonly database|disk I\/O error|malformed|not a database|unable to open database/i

const isUnavailable = (error: unknown, depth = 0): boolean => {
  if (depth > 5 || !Predicate.isObject(error)) return false
  const code = Predicate.hasProperty(error, "code") ? String(error.code) : ""
  const message = Predicate.hasProperty(error, "message") ? String(error.message) : ""
  return unavailableSqlStates.has(code) || unavailableWords.test(code) || unavailableWords.test(message) ||
    (Predicate.hasProperty(error, "cause") && isUnavailable(error.cause, depth + 1))
}

/**
 * The database's words when a request failed because the database cannot serve now (away,
 * hung past its timeouts, out of connections, locked, read-only or full): such a request is
 * answered 503 with `Retry-After`, not 500, so a client can tell an outage from a bug.
 */
export const databaseUnavailable = (cause: Cause.Cause<unknown>): Option.Option<string> => {
  for (const defect of [...Cause.defects(cause), ...Cause.failures(cause)]) {
    if (defect instanceof SqlError && isUnavailable(defect)) {
      return Option.some(Predicate.hasProperty(defect.cause, "message") ? String(defect.cause.message) : defect.message)
    }
  }
  return Option.none()
}
