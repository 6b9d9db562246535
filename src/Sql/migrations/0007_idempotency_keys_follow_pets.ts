import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Deleting a pet deletes its idempotency records: kept with a NULL pet_id, one would read as a create still
  // running, and a retry of its key creates the pet again. The index serves the lookup by pet.
  yield* sql.onDialectOrElse({
    pg: () =>
      sql`ALTER TABLE idempotency_keys
        DROP CONSTRAINT idempotency_keys_pet_id_fkey,
        ADD CONSTRAINT idempotency_keys_pet_id_fkey FOREIGN KEY (pet_id) REFERENCES pets (id) ON DELETE CASCADE`,
    // SQLite cannot alter a foreign key: the table is made again, as its "other kinds of table schema changes" say.
    orElse: () =>
      Effect.gen(function*() {
        yield* sql`CREATE TABLE idempotency_keys_new (
          api_key_id INTEGER NOT NULL,
          idempotency_key TEXT NOT NULL,
          fingerprint TEXT,
          pet_id INTEGER REFERENCES pets (id) ON DELETE CASCADE,
          created_at INTEGER NOT NULL,
          PRIMARY KEY (api_key_id, idempotency_key)
        )`
        yield* sql`INSERT INTO idempotency_keys_new (api_key_id, idempotency_key, fingerprint, pet_id, created_at)
          SELECT api_key_id, idempotency_key, fingerprint, pet_id, created_at FROM idempotency_keys`
        yield* sql`DROP TABLE idempotency_keys`
        yield* sql`ALTER TABLE idempotency_keys_new RENAME TO idempotency_keys`
        yield* sql`CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at)`
      })
  })
  yield* sql`CREATE INDEX idempotency_keys_pet_id ON idempotency_keys (pet_id)`
})
