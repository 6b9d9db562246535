import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { type CopyIn, copyIn } from "./CopyIn.js"
import type { PostgresSession } from "./PostgresSession.js"
import { type CanonicalRow, type Column, type CopiedTable, quoted, sqliteTime } from "./Tables.js"

/**
 * A writer of pages of canonical rows into the target, in as few statements as the engine allows;
 * `effect/sql`'s `sql.insert` would build one placeholder per value and cost several times
 * the insert itself at a million rows. The statements' texts are made once per table.
 *
 * PostgreSQL: one `INSERT … SELECT FROM unnest(…)` per page, a single array parameter per
 * column, so the statement's text stays the same whatever the page's size. SQLite: multi-row
 * `VALUES` inside the copy's transaction, 500 rows a statement (measured: twice as fast as one row
 * a statement, and larger statements get slower again).
 */
const rowWriter = (
  sql: SqlClient.SqlClient,
  table: CopiedTable
): (rows: ReadonlyArray<CanonicalRow>) => Effect.Effect<void, SqlError> =>
  sql.onDialectOrElse({
    pg: () => {
      const text = postgresInsert(table)
      return (rows) =>
        rows.length === 0
          ? Effect.void
          : Effect.asVoid(sql.unsafe(text, table.columns.map((_, i) => rows.map((row) => row[i]))))
    },
    orElse: () => {
      const full = sqliteInsert(table, sqliteRowsPerStatement)
      return (rows) =>
        Effect.forEach(chunks(rows, sqliteRowsPerStatement), (chunk) =>
          sql.unsafe(
            chunk.length === sqliteRowsPerStatement ? full : sqliteInsert(table, chunk.length),
            chunk.flatMap((row) => row.map((value, i) => sqliteValue(table.columns[i]!, value)))
          ), { discard: true })
    }
  })

const sqliteRowsPerStatement = 500

const postgresTypes = { integer: "bigint", text: "text", time: "timestamptz" } as const

const columnList = (table: CopiedTable) => table.columns.map((column) => quoted(column.name)).join(", ")

const conflict = (table: CopiedTable) => {
  if (table.upsert !== true) return ""
  const key = table.columns.slice(0, table.keyLength).map((column) => quoted(column.name))
  const rest = table.columns.slice(table.keyLength).map((column) =>
    `${quoted(column.name)} = excluded.${quoted(column.name)}`
  )
  return ` ON CONFLICT (${key.join(", ")}) DO UPDATE SET ${rest.join(", ")}`
}

const postgresInsert = (table: CopiedTable) => {
  const arrays = table.columns.map((column, i) => `$${i + 1}::${postgresTypes[column.kind]}[]`)
  // OVERRIDING SYSTEM VALUE: the ids are the source's, not new ones from the identity.
  return `INSERT INTO ${table.name} (${columnList(table)}) ` +
    `${table.sequence === undefined ? "" : "OVERRIDING SYSTEM VALUE "}SELECT * FROM unnest(${arrays.join(", ")})${
      conflict(table)
    }`
}

const sqliteInsert = (table: CopiedTable, rows: number) => {
  const row = `(${table.columns.map(() => "?").join(", ")})`
  return `INSERT INTO ${table.name} (${columnList(table)}) VALUES ` +
    Array.from({ length: rows }, () => row).join(", ") +
    conflict(table)
}

const sqliteValue = (column: Column, value: string | null) =>
  value === null ? null : column.kind === "integer" ? Number(value) : column.kind === "time" ? sqliteTime(value) : value

function* chunks<A>(items: ReadonlyArray<A>, size: number) {
  for (let i = 0; i < items.length; i += size) yield items.slice(i, i + size)
}

/**
 * How the copy fills a table in the target's transaction: PostgreSQL's COPY on the target's
 * session (`copyClient`) when the table takes plain inserts, else `writeRows`.
 */
export const tableWriter = (
  sql: SqlClient.SqlClient,
  table: CopiedTable,
  copyClient: PostgresSession | undefined
): Effect.Effect<CopyIn> =>
  copyClient !== undefined && table.upsert !== true
    ? copyIn(copyClient, table)
    : Effect.sync(() => ({ write: rowWriter(sql, table), end: Effect.void, abort: Effect.void }))
