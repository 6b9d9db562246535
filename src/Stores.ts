import { Effect, Layer } from "effect"
import { AppConfig } from "./AppConfig.js"
import { ApiKeys } from "./Auth/ApiKeys.js"
import { RateLimiter } from "./Auth/RateLimiter.js"
import { Cursors } from "./Pets/Cursors.js"
import { PetRepository } from "./Pets/PetRepository.js"
import { Sqlite } from "./Sql/Database.js"
import { isPostgresUrl, PostgresLive } from "./Sql/Postgres.js"

/**
 * The stores on the database `DATABASE_URL` names. On SQLite (one machine) rate limits are kept
 * in the process; on PostgreSQL every instance shares them through the database.
 */
export const StoresLive = Layer.unwrapEffect(
  Effect.map(AppConfig, ({ databaseUrl }) =>
    isPostgresUrl(databaseUrl)
      ? Layer.mergeAll(PetRepository.Postgres, ApiKeys.Postgres, Cursors.Postgres, RateLimiter.Postgres).pipe(
        Layer.provide(PostgresLive)
      )
      : Layer.mergeAll(PetRepository.Sqlite, ApiKeys.Sqlite, Cursors.Sqlite, RateLimiter.InMemory).pipe(
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
