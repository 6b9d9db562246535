import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import type { Table } from "./Tables.js"

/**
 * The id a table's next row gets: PostgreSQL's identity sequence, SQLite's AUTOINCREMENT counter
 * (`sqlite_sequence`). Both stay above every id ever handed out, even after the row is gone, so a
 * move carries the counter, not only the highest id.
 */
export const nextId = (sql: SqlClient.SqlClient, table: Table & { readonly sequence: string }) =>
  sql.onDialectOrElse({
    pg: () =>
      Effect.flatMap(
        sql<{ name: string }>`SELECT pg_get_serial_sequence(${table.name}, ${table.sequence}) AS name`,
        ([row]) =>
          // The name comes from PostgreSQL itself, quoted as needed.
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
export const highestId = (sql: SqlClient.SqlClient, table: Table & { readonly sequence: string }) =>
  Effect.map(
    sql.unsafe<{ id: string | number | null }>(`SELECT max(${table.sequence}) AS id FROM ${table.name}`),
    ([row]) => Number(row?.id ?? 0)
  )

/** Makes `next` the id the table's next row gets. */
export const setNextId = (sql: SqlClient.SqlClient, table: Table & { readonly sequence: string }, next: number) =>
  sql.onDialectOrElse({
    pg: () => sql`SELECT setval(pg_get_serial_sequence(${table.name}, ${table.sequence}), ${next}, false)`,
    orElse: () =>
      Effect.andThen(
        sql`DELETE FROM sqlite_sequence WHERE name = ${table.name}`,
        sql`INSERT INTO sqlite_sequence (name, seq) VALUES (${table.name}, ${next - 1})`
      )
  }).pipe(Effect.asVoid)

export const sequencedTables = (tables: ReadonlyArray<Table>) =>
  tables.filter((table): table is Table & { readonly sequence: string } => table.sequence !== undefined)

/**
 * The highest id the table has handed out, 0 when none: its counter's last, or a row's above it
 * (a counter behind its rows, as a plain SQL load leaves it).
 */
export const lastHandedOut = (sql: SqlClient.SqlClient, table: Table & { readonly sequence: string }) =>
  Effect.map(Effect.all([nextId(sql, table), highestId(sql, table)]), ([next, highest]) => Math.max(next - 1, highest))
