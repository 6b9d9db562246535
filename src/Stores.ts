import { Effect, Layer } from "effect"
import { AppConfig } from "./AppConfig.js"
import { ApiKeys } from "./Auth/ApiKeys.js"
import { RateLimiter } from "./Auth/RateLimiter.js"
import { RateLimiterPostgres } from "./Auth/RateLimiterPostgres.js"
import { ReadOnlyMode } from "./Move/ReadOnlyMode.js"
import { Cursors } from "./Pets/Cursors.js"
import { PetRepository } from "./Pets/PetRepository.js"
import { Sqlite } from "./Sql/Database.js"
import { isPostgresUrl, PostgresLive } from "./Sql/Postgres.js"

/**
 * The stores on the database `DATABASE_URL` names. Rate-limit buckets are in PostgreSQL, shared by
 * every instance and leased in batches; on SQLite they are in memory, each of several workers
 * enforcing its share.
 */
export const StoresLive = Layer.unwrapEffect(
  Effect.map(AppConfig, ({ databaseUrl, workers }) =>
    isPostgresUrl(databaseUrl)
      ? Layer.mergeAll(PetRepository.Postgres, ApiKeys.Postgres, Cursors.Postgres, RateLimiterPostgres(), ReadOnlyMode.Postgres).pipe(
        Layer.provide(PostgresLive)
      )
      : Layer.mergeAll(
        PetRepository.Sqlite,
        ApiKeys.Sqlite,
        Cursors.Sqlite,
        ReadOnlyMode.Sqlite,
        workers > 1 ? RateLimiter.InMemoryShare(workers) : RateLimiter.InMemory
      ).pipe(
        Layer.provide(Sqlite.layer)
      )
  )
)

/** The API keys alone, for the keys command. */
export const ApiKeysLive = Layer.unwrapEffect(
  Effect.map(AppConfig, ({ databaseUrl }) =>
    isPostgresUrl(databaseUrl)
      ? ApiKeys.Postgres.pipe(Layer.provide(PostgresLive))
      : ApiKeys.Sqlite.pipe(Layer.provide(Sqlite.layer))
  )
)

/** Applies the migrations of the database `DATABASE_URL` names, then closes it. */
export const migrate = Effect.flatMap(AppConfig, ({ databaseUrl }) =>
  isPostgresUrl(databaseUrl)
    ? Effect.scoped(Effect.asVoid(Layer.build(PostgresLive)))
    : Effect.scoped(Effect.asVoid(Layer.build(Sqlite.layer)))
)
