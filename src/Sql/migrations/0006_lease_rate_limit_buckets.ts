import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Instances lease tokens in batches (`granted`: the last lease's size); past `full_at` a bucket
  // is full again, the same as no row, and is deleted. PostgreSQL only, as the table.
  yield* sql.onDialectOrElse({
    pg: () =>
      Effect.andThen(
        sql`ALTER TABLE rate_limit_buckets
          ADD COLUMN granted INTEGER NOT NULL DEFAULT 0,
          ADD COLUMN full_at BIGINT NOT NULL DEFAULT 0`,
        sql`CREATE INDEX rate_limit_buckets_full_at ON rate_limit_buckets (full_at)`
      ),
    orElse: () => Effect.void
  })
})
