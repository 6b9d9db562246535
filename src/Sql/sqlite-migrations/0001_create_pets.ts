import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // AUTOINCREMENT: ids are never reused, even after the highest row is gone.
  yield* sql`CREATE TABLE pets (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    category_id INTEGER NOT NULL,
    status TEXT CHECK (status IN ('available', 'pending', 'sold'))
  )`
  // Serves the status filter in id order: WHERE status = ? AND id > ? ORDER BY id.
  yield* sql`CREATE INDEX pets_status_id ON pets (status, id)`
})
