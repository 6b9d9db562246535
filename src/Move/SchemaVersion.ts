import { Effect, Option } from "effect"
import type { SqlClient } from "effect/sql"
import { migrations } from "../Sql/Migrations.js"
import { readOnlySince, setReadOnly, settleMillis } from "../Sql/ReadOnlyMode.js"
import { connect, describeStoreFailure, engineName, MoveError, type Store } from "./Store.js"
import { type Table, tables } from "./Tables.js"

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

/** The store's schema version, refused when the service never migrated it. */
const requireVersion = (sql: SqlClient.SqlClient, store: Store, role: string) =>
  Effect.flatMap(
    versionOf(sql),
    Option.match({
      onNone: () =>
        Effect.fail(
          new MoveError({
            message: `${role} ${store.label} is not a Pet Store database: it has no ${migrationsTable} table`
          })
        ),
      onSome: Effect.succeed
    })
  )

/** Refuses a store whose schema is not the one this build's migrations make, naming both versions. */
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
    return known
  })

/** Waits until every instance has seen read-only mode turned on at `since` (`settleMillis`). */
export const settled = (since: Date) => Effect.sleep(Math.max(0, settleMillis - (Date.now() - since.getTime())))

export type SequencedTable = Table & { readonly sequence: string }

export const sequencedTables = tables.filter((table): table is SequencedTable => table.sequence !== undefined)

/** The tables with an id sequence that the store holds. */
export const sequencedIn = (sql: SqlClient.SqlClient) =>
  Effect.map(tablesOf(sql), (names) => sequencedTables.filter((table) => names.has(table.name)))

/**
 * The id a table's next row gets: PostgreSQL's identity sequence, SQLite's AUTOINCREMENT counter.
 * Both stay above every id ever handed out, even after the row is gone, so a move carries the counter.
 */
export const nextId = (sql: SqlClient.SqlClient, table: SequencedTable) =>
  sql.onDialectOrElse({
    pg: () =>
      Effect.flatMap(
        sql<{ name: string }>`SELECT pg_get_serial_sequence(${table.name}, ${table.sequence}) AS name`,
        // The name comes from PostgreSQL itself, quoted as needed.
        ([row]) =>
          Effect.map(
            sql.unsafe<{ last_value: string; is_called: boolean }>(
              `SELECT last_value::text, is_called FROM ${row!.name}`
            ),
            ([sequence]) => Number(sequence!.last_value) + (sequence!.is_called ? 1 : 0)
          )
      ),
    orElse: () =>
      Effect.map(
        sql<{ seq: number }>`SELECT seq FROM sqlite_sequence WHERE name = ${table.name}`,
        ([row]) => (row === undefined ? 1 : Number(row.seq) + 1)
      )
  })

/** The highest id in the table, 0 when empty. */
export const highestId = (sql: SqlClient.SqlClient, table: SequencedTable) =>
  Effect.map(
    sql.unsafe<{ id: string | number | null }>(`SELECT max(${table.sequence}) AS id FROM ${table.name}`),
    ([row]) => Number(row?.id ?? 0)
  )

/** Makes `next` the id the table's next row gets. */
export const setNextId = (sql: SqlClient.SqlClient, table: SequencedTable, next: number) =>
  sql.onDialectOrElse({
    pg: () => sql`SELECT setval(pg_get_serial_sequence(${table.name}, ${table.sequence}), ${next}, false)`,
    orElse: () =>
      Effect.andThen(
        sql`DELETE FROM sqlite_sequence WHERE name = ${table.name}`,
        sql`INSERT INTO sqlite_sequence (name, seq) VALUES (${table.name}, ${next - 1})`
      )
  }).pipe(Effect.asVoid)

/** The highest id the table has handed out: its counter's last, or a row's above it (as a plain SQL load leaves it). */
export const lastHandedOut = (sql: SqlClient.SqlClient, table: SequencedTable) =>
  Effect.map(Effect.all([nextId(sql, table), highestId(sql, table)]), ([next, highest]) => Math.max(next - 1, highest))

/** Runs `effect` on the store opened in `mode`, its failures told in one line. */
const onStore = <A, E>(
  store: Store,
  mode: "read" | "write",
  effect: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>
) =>
  Effect.flatMap(connect(store, { role: "the", mode }), effect).pipe(
    Effect.mapError((error) => describeStoreFailure(store, "the", error)),
    Effect.scoped
  )

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
      const counts = yield* Effect.forEach(names, (name) =>
        Effect.map(
          sql.unsafe<{ count: string | number }>(`SELECT count(*) AS count FROM "${name}"`),
          ([row]) => Number(row?.count ?? 0)
        ))
      return [
        `engine          ${engineName(store)}`,
        `database        ${store.label}`,
        `schema version  ${Option.getOrElse(Option.map(version, String), () => "none (not a Pet Store database)")} ` +
        `(this build: ${known})`,
        `read-only       ${
          Option.match(since, { onNone: () => "off", onSome: (at) => `on since ${at.toISOString()}` })
        }`,
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

/*
 * A restore from `pg_dump` brings back the id sequences as they were at the backup, below ids handed
 * out since: `lastId` reads what the database to be replaced handed out, while it still exists, and
 * `restoreIds` sets the restored database's sequences above it, so that no id is handed out twice.
 */

/** The highest id any of the store's tables has handed out (its sequence's, not only its rows'), 0 when none. */
export const lastId = (store: Store) =>
  onStore(store, "read", (sql) =>
    Effect.gen(function*() {
      yield* requireVersion(sql, store, "the database")
      const handedOut = yield* Effect.forEach(yield* sequencedIn(sql), (table) => lastHandedOut(sql, table))
      return Math.max(0, ...handedOut)
    }))

/** Sets every id sequence of the store above `above` (and above its own rows); one never goes down. */
export const restoreIds = (store: Store, above: number) =>
  !Number.isSafeInteger(above) || above < 0
    ? Effect.fail(new MoveError({ message: `--above: must be an id, 0 or more (got ${above})` }))
    : onStore(store, "write", (sql) =>
      Effect.gen(function*() {
        yield* requireVersion(sql, store, "the database")
        const set = yield* sql.withTransaction(Effect.forEach(yield* sequencedIn(sql), (table) =>
          Effect.gen(function*() {
            const was = yield* nextId(sql, table)
            const next = Math.max(was, (yield* lastHandedOut(sql, table)) + 1, above + 1)
            if (next === was) return `${table.name} ${next} (already)`
            yield* setNextId(sql, table, next)
            return `${table.name} ${next} (was ${was})`
          })))
        return `next ids above ${above} in ${store.label}: ${set.join(", ")}`
      }))
