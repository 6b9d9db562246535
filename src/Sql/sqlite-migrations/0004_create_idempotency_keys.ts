import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // One row per (API key, Idempotency-Key): reserved when a create starts (pet_id NULL), completed
  // with the request's fingerprint and the pet in the same transaction as the pet's insert.
  yield* sql`CREATE TABLE idempotency_keys (
    api_key_id INTEGER NOT NULL,
    idempotency_key TEXT NOT NULL,
    fingerprint TEXT,
    pet_id INTEGER REFERENCES pets (id),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (api_key_id, idempotency_key)
  )`
  yield* sql`CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at)`
})
