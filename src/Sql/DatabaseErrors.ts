import { SqlError } from "@effect/sql/SqlError"
import { Cause, Predicate } from "effect"

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
