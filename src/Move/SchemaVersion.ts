import { Effect, Option } from "effect"
import type { SqlClient } from "effect/sql"
import { migrations } from "../Sql/Migrations.js"
import { readOnlySince, setReadOnly, settleMillis } from "../Sql/ReadOnlyMode.js"
import { engineName, MoveError, onStore, type Store } from "./Store.js"
import { countRows } from "./Tables.js"

export const migrationsTable = "effect_sql_migrations"

export const knownVersion: Effect.Effect<number> = Effect.orDie(
  Effect.map(migrations, (all) => Math.max(0, ...all.map(([id]) => id)))
)

export const tablesOf = (sql: SqlClient.SqlClient): Effect.Effect<ReadonlySet<string>, unknown> =>
  Effect.map(
    sql.onDialectOrElse({
      pg: () => sql<{ name: string }>`SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema()`,
      orElse: () => sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table'`
    }),
    (rows) => new Set(rows.map(({ name }) => name))
  )

export const versionOf = (sql: SqlClient.SqlClient): Effect.Effect<Option.Option<number>, unknown> =>
  Effect.flatMap(tablesOf(sql), (tables) =>
    tables.has(migrationsTable)
      ? Effect.map(
        sql<{ version: number | string | null }>`SELECT max(migration_id) AS version FROM ${sql(migrationsTable)}`,
        ([row]) => Option.some(Number(row?.version ?? 0))
      )
      : Effect.succeed(Option.none()))

export const requireVersion = (sql: SqlClient.SqlClient, store: Store, role: string) =>
  Effect.flatMap(versionOf(sql), (version) =>
    Option.isSome(version) ? Effect.succeed(version.value) : Effect.fail(
      new MoveError({
        message: `${role} ${store.label} is not a Pet Store database: it has no ${migrationsTable} table`
      })
    ))

export const requireKnownVersion = (sql: SqlClient.SqlClient, store: Store, role: string) =>
  Effect.gen(function*() {
    const known = yield* knownVersion
    const found = yield* requireVersion(sql, store, role)
    if (found !== known) {
      return yield* new MoveError({
        message: `${role} ${store.label} has schema version ${found}, but this build knows schema version ${known}; ${
          found < known ? "start this build's service on it once to migrate it" : "use the build that wrote it"
        }`
      })
    }
  })

/** Waits until every instance has seen read-only mode turned on at `since` (`settleMillis`). */
export const settled = (since: Date) => Effect.sleep(Math.max(0, settleMillis - (Date.now() - since.getTime())))

/** A quick look before and after a move: the engine, the schema version, read-only or not, and the rows per table. */
export const status = (store: Store) =>
  onStore(store, "read", (sql) =>
    Effect.gen(function*() {
      const known = yield* knownVersion
      const version = yield* versionOf(sql)
      const names = [...(yield* tablesOf(sql))]
        .filter((name) => name !== migrationsTable && !name.startsWith("sqlite_"))
        .sort()
      const since = names.includes("settings") ? yield* readOnlySince(sql) : Option.none()
      const counts = yield* Effect.forEach(names, (name) => countRows(sql, { name }))
      const readOnly = Option.match(since, { onNone: () => "off", onSome: (at) => `on since ${at.toISOString()}` })
      return [
        `engine          ${engineName(store)}`,
        `database        ${store.label}`,
        `schema version  ${Option.getOrElse(Option.map(version, String), () => "none (not a Pet Store database)")} ` +
        `(this build: ${known})`,
        `read-only       ${readOnly}`,
        "",
        `${"table".padEnd(20)}${"rows".padStart(12)}`,
        ...names.map((name, i) => `${name.padEnd(20)}${String(counts[i]).padStart(12)}`)
      ]
    }))

/** `db read-only on|off`: the flag set; on, after the instances' settle, so that every one has seen it. */
export const readOnly = (store: Store, state: boolean) =>
  onStore(store, "write", (sql) =>
    Effect.gen(function*() {
      yield* requireKnownVersion(sql, store, "the database")
      yield* setReadOnly(sql, state)
      if (!state) return `read-only off: ${store.label} takes writes again`
      const since = Option.getOrThrow(yield* readOnlySince(sql))
      yield* settled(since)
      return `read-only on since ${since.toISOString()}: every instance on ${store.label} ` +
        "answers creates with 503 read_only; reads are served"
    }))
