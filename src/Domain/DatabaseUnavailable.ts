import { Schema } from "effect"

/**
 * The database cannot serve this request now (away, hung past its timeouts, out of connections,
 * locked by another process, read-only or full), as opposed to a fault of the statement: answered
 * 503 with `Retry-After`, not 500, so a client can tell an outage from a bug. `message` is the
 * database's own words, for the log.
 */
export class DatabaseUnavailable extends Schema.TaggedError<DatabaseUnavailable>()("DatabaseUnavailable", {
  reason: Schema.Literals(["unavailable", "busy", "read_only", "full"]),
  message: Schema.String
}) {}
