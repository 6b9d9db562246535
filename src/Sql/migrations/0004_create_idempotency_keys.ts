import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const integer = sql.onDialectOrElse({ pg: () => sql.literal("BIGINT"), orElse: () => sql.literal("INTEGER") })
  // One row per (API key, Idempotency-Key): reserved when a create starts (pet_id NULL), completed in
  // the pet's insert's transaction. created_at: epoch milliseconds of the service's clock.
  yield* sql`CREATE TABLE idempotency_keys (
    api_key_id ${integer} NOT NULL,
    idempotency_key TEXT NOT NULL,
    fingerprint TEXT,
    pet_id ${integer} REFERENCES pets (id),
    created_at ${integer} NOT NULL,
    PRIMARY KEY (api_key_id, idempotency_key)
  )`
  yield* sql`CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at)`
})
