import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import { requireVersion, tablesOf } from "./SchemaVersion.js"
import { MoveError, onStore, type Store } from "./Store.js"
import { type Table, tables } from "./Tables.js"

type SequencedTable = Table & { readonly sequence: string }

/** The tables whose ids come from a sequence, which must stay above every id handed out. */
export const sequencedTables = tables.filter((table): table is SequencedTable => table.sequence !== undefined)

export const sequencedIn = (sql: SqlClient.SqlClient) =>
  Effect.map(tablesOf(sql), (names) => sequencedTables.filter((table) => names.has(table.name)))

/** The id a table's next row gets: above every id ever handed out, rows gone included, so a move carries it. */
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

const setNextId = (sql: SqlClient.SqlClient, table: SequencedTable, next: number) =>
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
  Effect.zipWith(
    nextId(sql, table),
    sql.unsafe<{ id: string | number | null }>(`SELECT max(${table.sequence}) AS id FROM ${table.name}`),
    (next, [highest]) => Math.max(next - 1, Number(highest?.id ?? 0))
  )

/** The highest id the store handed out, read before `pg_restore` brings back the backup's sequences. */
export const lastId = (store: Store) =>
  onStore(store, "read", (sql) =>
    Effect.gen(function*() {
      yield* requireVersion(sql, store, "the database")
      const handedOut = yield* Effect.forEach(yield* sequencedIn(sql), (table) => lastHandedOut(sql, table))
      return Math.max(0, ...handedOut)
    }))

/** Sets each id sequence the store holds above its ids and above `above(table)`; none goes down. */
export const raiseNextIds = (sql: SqlClient.SqlClient, above: (table: SequencedTable) => number) =>
  Effect.gen(function*() {
    const sequenced = yield* sequencedIn(sql)
    return yield* sql.withTransaction(Effect.forEach(sequenced, (table) =>
      Effect.gen(function*() {
        const was = yield* nextId(sql, table)
        const next = Math.max(was, (yield* lastHandedOut(sql, table)) + 1, above(table) + 1)
        if (next !== was) yield* setNextId(sql, table, next)
        return { name: table.name, next, was }
      })))
  })

export const restoreIds = (store: Store, above: number) =>
  !Number.isSafeInteger(above) || above < 0
    ? Effect.fail(new MoveError({ message: `--above: must be an id, 0 or more (got ${above})` }))
    : onStore(store, "write", (sql) =>
      Effect.gen(function*() {
        yield* requireVersion(sql, store, "the database")
        const set = yield* raiseNextIds(sql, () => above)
        const sequences = set.map(({ name, next, was }) =>
          `${name} ${next} (${next === was ? "already" : `was ${was}`})`
        )
        return `next ids above ${above} in ${store.label}: ${sequences.join(", ")}`
      }))
