import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import { type CopyIn, copyIn } from "./CopyIn.js"
import type { PostgresSession } from "./PostgresSession.js"
import { type CanonicalRow, type Column, sqliteTime, type Table } from "./Tables.js"

/**
 * Writes a page of canonical rows into the target in as few statements as the engine allows;
 * `effect/sql`'s `sql.insert` would build one placeholder per value and cost several times
 * the insert itself at a million rows.
 *
 * PostgreSQL: one `INSERT … SELECT FROM unnest(…)` per page, a single array parameter per
 * column, so the statement's text stays the same whatever the page's size. SQLite: multi-row
 * `VALUES` inside the copy's transaction, 500 rows a statement (measured: twice as fast as one row
 * a statement, and larger statements get slower again).
 */
export const writeRows = (sql: SqlClient.SqlClient, table: Table, rows: ReadonlyArray<CanonicalRow>) =>
  rows.length === 0 ? Effect.void : sql.onDialectOrElse({
    pg: () => Effect.asVoid(sql.unsafe(postgresInsert(table), table.columns.map((_, i) => rows.map((row) => row[i])))),
    orElse: () => Effect.forEach(chunks(rows, sqliteRowsPerStatement), (chunk) =>
      sql.unsafe(sqliteInsert(table, chunk.length), chunk.flatMap((row) => row.map((value, i) => sqliteValue(table.columns[i]!, value)))),
      { discard: true })
  })

const sqliteRowsPerStatement = 500

const postgresTypes = { integer: "bigint", text: "text", time: "timestamptz" } as const

const conflict = (table: Table) => {
  if (table.upsert !== true) return ""
  const key = table.columns.slice(0, table.keyLength).map((column) => column.name)
  const rest = table.columns.slice(table.keyLength).map((column) => `${column.name} = excluded.${column.name}`)
  return ` ON CONFLICT (${key.join(", ")}) DO UPDATE SET ${rest.join(", ")}`
}

// One statement text per table the move copies: as many entries as `Tables.ts` lists.
const postgresInserts = new Map<string, string>()
const postgresInsert = (table: Table) => {
  let text = postgresInserts.get(table.name)
  if (text === undefined) {
    const arrays = table.columns.map((column, i) => `$${i + 1}::${postgresTypes[column.kind]}[]`)
    // OVERRIDING SYSTEM VALUE: the ids are the source's, not new ones from the identity.
    text = `INSERT INTO ${table.name} (${table.columns.map((column) => column.name).join(", ")}) ` +
      `${table.sequence === undefined ? "" : "OVERRIDING SYSTEM VALUE "}SELECT * FROM unnest(${arrays.join(", ")})${conflict(table)}`
    postgresInserts.set(table.name, text)
  }
  return text
}

const sqliteInsert = (table: Table, rows: number) => {
  const row = `(${table.columns.map(() => "?").join(", ")})`
  return `INSERT INTO ${table.name} (${table.columns.map((column) => column.name).join(", ")}) VALUES ` +
    Array.from({ length: rows }, () => row).join(", ") + conflict(table)
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
  table: Table,
  copyClient: PostgresSession | undefined
): Effect.Effect<CopyIn> =>
  copyClient !== undefined && table.upsert !== true
    ? copyIn(copyClient, table)
    : Effect.succeed({ write: (rows) => writeRows(sql, table, rows), end: Effect.void, abort: Effect.void })
