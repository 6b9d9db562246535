import { Effect, Option } from "effect"
import type { SqlClient } from "effect/sql"
import { migrations } from "../Sql/Migrations.js"
import { MoveError, type Store } from "./Store.js"

/** The table `effect/sql`'s migrator records the applied migrations in. */
export const migrationsTable = "effect_sql_migrations"

/** The schema version this build's migrations give either engine: the highest migration id. */
export const knownVersion: Effect.Effect<number> = Effect.orDie(
  Effect.map(migrations, (all) => Math.max(0, ...all.map(([id]) => id)))
)

/** The tables in the store's schema (PostgreSQL: the connection's current schema). */
export const tablesOf = (sql: SqlClient.SqlClient): Effect.Effect<ReadonlySet<string>, unknown> =>
  Effect.map(
    sql.onDialectOrElse({
      pg: () => sql<{ name: string }>`SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema()`,
      orElse: () => sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table'`
    }),
    (rows) => new Set(rows.map(({ name }) => name))
  )

/** The store's schema version (its highest applied migration), or none when the service never migrated it. */
export const versionOf = (sql: SqlClient.SqlClient): Effect.Effect<Option.Option<number>, unknown> =>
  Effect.flatMap(tablesOf(sql), (tables) =>
    tables.has(migrationsTable)
      ? Effect.map(
        sql<{ version: number | string | null }>`SELECT max(migration_id) AS version FROM ${sql(migrationsTable)}`,
        ([row]) => Option.some(Number(row?.version ?? 0))
      )
      : Effect.succeed(Option.none()))

/** Refuses a store whose schema is not the one this build's migrations make, naming both versions. */
export const requireKnownVersion = (sql: SqlClient.SqlClient, store: Store, role: string) =>
  Effect.gen(function*() {
    const known = yield* knownVersion
    const found = yield* versionOf(sql)
    if (Option.isNone(found)) {
      return yield* new MoveError({
        message: `${role} ${store.label} is not a Pet Store database: it has no ${migrationsTable} table`
      })
    }
    if (found.value !== known) {
      return yield* new MoveError({
        message: `${role} ${store.label} has schema version ${found.value}, but this build knows ` +
          `schema version ${known}; ${
            found.value < known ? "start this build's service on it once to migrate it" : "use the build that wrote it"
          }`
      })
    }
    return known
  })
