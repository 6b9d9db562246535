import { Schema } from "effect"

/**
 * The database cannot serve now (away, hung, out of connections, locked, read-only or full), not a
 * fault of the statement: answered 503, so a client can tell an outage from a bug. `message` is its own words.
 */
export class DatabaseUnavailable extends Schema.TaggedError<DatabaseUnavailable>()("DatabaseUnavailable", {
  reason: Schema.Literals(["unavailable", "busy", "read_only", "full"]),
  message: Schema.String
}) {}
