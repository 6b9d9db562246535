import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Ids are never reused, even the highest once deleted; BIGINT on PostgreSQL, up to Number.MAX_SAFE_INTEGER.
  const idColumn = sql.onDialectOrElse({
    pg: () => sql.literal("id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"),
    orElse: () => sql.literal("id INTEGER PRIMARY KEY AUTOINCREMENT")
  })
  const integer = sql.onDialectOrElse({ pg: () => sql.literal("BIGINT"), orElse: () => sql.literal("INTEGER") })
  yield* sql`CREATE TABLE pets (
    ${idColumn},
    name TEXT NOT NULL,
    category_id ${integer} NOT NULL,
    status TEXT CHECK (status IN ('available', 'pending', 'sold'))
  )`
  // Serves the status filter in id order: WHERE status = ? AND id > ? ORDER BY id.
  yield* sql`CREATE INDEX pets_status_id ON pets (status, id)`
})
