import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // BIGINT: ids and category ids reach Number.MAX_SAFE_INTEGER. An identity never reuses an id.
  yield* sql`CREATE TABLE pets (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL,
    category_id BIGINT NOT NULL,
    status TEXT CHECK (status IN ('available', 'pending', 'sold'))
  )`
  // Serves the status filter in id order: WHERE status = $1 AND id > $2 ORDER BY id.
  yield* sql`CREATE INDEX pets_status_id ON pets (status, id)`
})
