import { Effect, Layer } from "effect"
import type { SqlClient } from "effect/sql"
import { ApiKeys } from "../Auth/ApiKeys.js"
import { RateLimiter } from "../Auth/RateLimiter.js"
import { RateLimiterPostgres } from "../Auth/RateLimiterPostgres.js"
import { AppConfig, isPostgresUrl } from "../Config/AppConfig.js"
import { Cursors } from "../Pets/Cursors.js"
import { PetRepository } from "../Pets/PetRepository.js"
import { PostgresConnection } from "../Sql/PostgresConnection.js"
import { ReadOnlyMode } from "../Sql/ReadOnlyMode.js"
import { SqliteConnection } from "../Sql/SqliteConnection.js"

/** The database `DATABASE_URL` names, SQLite file or PostgreSQL, migrated, as a `SqlClient`. */
export const DatabaseLive: Layer.Layer<SqlClient.SqlClient, Error, AppConfig> = Layer.unwrap(
  AppConfig.useSync(({ databaseUrl }) => isPostgresUrl(databaseUrl) ? PostgresConnection : SqliteConnection)
)

/** The stores on `DATABASE_URL`; rate limits shared in PostgreSQL, in memory (a share per worker) on SQLite. */
export const StoresLive = Layer.unwrap(
  AppConfig.useSync(({ databaseUrl, workers }) =>
    Layer.mergeAll(
      PetRepository.Sql,
      ApiKeys.Sql,
      Cursors.Sql,
      ReadOnlyMode.layer,
      isPostgresUrl(databaseUrl)
        ? RateLimiterPostgres()
        : workers > 1
        ? RateLimiter.InMemoryShare(workers)
        : RateLimiter.InMemory
    ).pipe(Layer.provide(DatabaseLive))
  )
)

export const ApiKeysLive = ApiKeys.Sql.pipe(Layer.provide(DatabaseLive))

/** Applies the migrations of the database `DATABASE_URL` names, then closes it. */
export const migrate = Effect.scoped(Effect.asVoid(Layer.build(DatabaseLive)))
