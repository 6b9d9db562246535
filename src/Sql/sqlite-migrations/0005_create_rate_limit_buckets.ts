import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Token buckets shared by the worker processes of one machine (WORKERS above 1): `bucket` is
  // the policy's name and the limited key.
  yield* sql`CREATE TABLE rate_limit_buckets (
    bucket TEXT PRIMARY KEY,
    tokens REAL NOT NULL,
    allowed INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  )`
  yield* sql`CREATE INDEX rate_limit_buckets_updated_at ON rate_limit_buckets (updated_at)`
})
