import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const idColumn = sql.onDialectOrElse({
    pg: () => sql.literal("id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"),
    orElse: () => sql.literal("id INTEGER PRIMARY KEY AUTOINCREMENT")
  })
  // SQLite keeps times as ISO 8601 text.
  const time = sql.onDialectOrElse({ pg: () => sql.literal("TIMESTAMPTZ"), orElse: () => sql.literal("TEXT") })
  yield* sql`CREATE TABLE api_keys (
    ${idColumn},
    name TEXT NOT NULL,
    prefix TEXT NOT NULL,
    key_hash TEXT NOT NULL UNIQUE,
    created_at ${time} NOT NULL,
    revoked_at ${time}
  )`
})
