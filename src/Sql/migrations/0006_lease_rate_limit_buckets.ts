import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Instances lease tokens in batches (`granted`: the last lease's size); `full_at` is when a
  // bucket would be full again, after which it is deleted as the same as no row. PostgreSQL only,
  // as the table.
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
