import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Token buckets shared by every instance (`bucket`: the policy and the key), UNLOGGED: a crash
  // only fills every bucket again, and a request spares a WAL write. SQLite's are in memory.
  yield* sql.onDialectOrElse({
    pg: () =>
      Effect.andThen(
        sql`CREATE UNLOGGED TABLE rate_limit_buckets (
          bucket TEXT PRIMARY KEY,
          tokens DOUBLE PRECISION NOT NULL,
          allowed BOOLEAN NOT NULL,
          updated_at BIGINT NOT NULL
        )`,
        sql`CREATE INDEX rate_limit_buckets_updated_at ON rate_limit_buckets (updated_at)`
      ),
    orElse: () => Effect.void
  })
})
