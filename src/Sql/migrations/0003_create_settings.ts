import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)`
  // Signs listPets cursors; kept with the data so every instance and restart shares it.
  yield* sql`INSERT INTO settings (name, value) VALUES ('cursor_secret', ${randomBytes(32).toString("hex")})`
})
