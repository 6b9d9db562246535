import { Schema } from "effect"

/** The database cannot serve now (down, hung, out of connections, locked, read-only, full): 503, not a bug's 500. */
export class DatabaseUnavailable extends Schema.TaggedError<DatabaseUnavailable>()("DatabaseUnavailable", {
  reason: Schema.Literals(["unavailable", "busy", "read_only", "full"]),
  message: Schema.String
}) {}
