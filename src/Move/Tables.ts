import type { SqlClient } from "effect/sql"
import { Effect } from "effect"

/**
 * What the move copies: every table whose rows the service needs after a move, in an order that
 * satisfies their foreign keys. Not copied: `rate_limit_buckets` (PostgreSQL only, refilled within
 * seconds, and unlogged anyway), and `effect_sql_migrations` (the target's come from its own
 * migrations). The `read_only` setting stays behind, so the new store starts writable.
 */

/** How a column's value is written in canonical form, the same whatever the engine it came from. */
export type ColumnKind = "integer" | "text" | "time"

export interface Column {
  readonly name: string
  readonly kind: ColumnKind
}

export interface Table {
  readonly name: string
  readonly columns: ReadonlyArray<Column>
  /** How many leading columns order the rows and page through them (the primary key). */
  readonly keyLength: number
  /** Rows left out of the move. */
  readonly where?: string
  /** The identity/AUTOINCREMENT column whose next value must stay above every copied id. */
  readonly sequence?: string
  /** Rows the target's own migrations already put there, replaced by the source's. */
  readonly upsert?: boolean
}

export const tables: ReadonlyArray<Table> = [
  {
    name: "pets",
    columns: [
      { name: "id", kind: "integer" },
      { name: "name", kind: "text" },
      { name: "category_id", kind: "integer" },
      { name: "status", kind: "text" }
    ],
    keyLength: 1,
    sequence: "id"
  },
  {
    name: "api_keys",
    columns: [
      { name: "id", kind: "integer" },
      { name: "name", kind: "text" },
      { name: "prefix", kind: "text" },
      { name: "key_hash", kind: "text" },
      { name: "created_at", kind: "time" },
      { name: "revoked_at", kind: "time" }
    ],
    keyLength: 1,
    sequence: "id"
  },
  {
    name: "settings",
    columns: [{ name: "name", kind: "text" }, { name: "value", kind: "text" }],
    keyLength: 1,
    where: "name <> 'read_only'",
    upsert: true
  },
  {
    name: "idempotency_keys",
    columns: [
      { name: "api_key_id", kind: "integer" },
      { name: "idempotency_key", kind: "text" },
      { name: "fingerprint", kind: "text" },
      { name: "pet_id", kind: "integer" },
      { name: "created_at", kind: "integer" }
    ],
    keyLength: 2
  }
]

/** A row in canonical form: every value as text (or null), so both engines' rows compare equal. */
export type CanonicalRow = Array<string | null>

/** The select list that reads a column in a form `canonicalValue` turns canonical. */
const selectColumn = (dialect: "pg" | "sqlite", column: Column) =>
  dialect === "pg" && column.kind === "time"
    ? `to_char(${column.name} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`
    : dialect === "pg" && column.kind === "integer"
    ? `${column.name}::text`
    : column.name

const timePattern = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?Z$/

/** A time as ISO 8601 in UTC with microseconds: PostgreSQL keeps microseconds, the service writes milliseconds. */
export const canonicalTime = (text: string): string => {
  const match = timePattern.exec(text)
  if (match !== null) return `${match[1]}.${(match[2] ?? "").padEnd(6, "0")}Z`
  const date = new Date(text)
  return Number.isNaN(date.getTime()) ? text : `${date.toISOString().slice(0, 23)}000Z`
}

/** A canonical time as the service writes it into SQLite: milliseconds unless there is more. */
export const sqliteTime = (canonical: string): string =>
  canonical.endsWith("000Z") ? `${canonical.slice(0, -4)}Z` : canonical

const canonicalValue = (kind: ColumnKind, value: unknown): string | null =>
  value === null || value === undefined
    ? null
    : kind === "time"
    ? canonicalTime(String(value))
    : typeof value === "string"
    ? value
    : String(value)

/**
 * Reads a table in pages of `batchSize` rows in key order, each row canonical; `after` is the
 * last row of the previous page. Keyset paging: each page is an index range scan, whatever the
 * table's size.
 */
export const readPage = (
  sql: SqlClient.SqlClient,
  table: Table,
  after: CanonicalRow | undefined,
  batchSize: number
): Effect.Effect<Array<CanonicalRow>, unknown> => {
  const dialect = sql.onDialectOrElse({ pg: () => "pg" as const, orElse: () => "sqlite" as const })
  const placeholder = (i: number) => (dialect === "pg" ? `$${i}` : "?")
  const key = table.columns.slice(0, table.keyLength)
  const conditions: Array<string> = []
  const params: Array<unknown> = []
  if (table.where !== undefined) conditions.push(table.where)
  if (after !== undefined) {
    const names = key.map((column) => column.name)
    const values = key.map((column, i) => {
      params.push(column.kind === "integer" && dialect === "sqlite" ? Number(after[i]) : after[i])
      const p = placeholder(params.length)
      return dialect === "pg" && column.kind === "integer" ? `${p}::bigint` : p
    })
    conditions.push(names.length === 1 ? `${names[0]} > ${values[0]}` : `(${names.join(", ")}) > (${values.join(", ")})`)
  }
  params.push(batchSize)
  const text = `SELECT ${table.columns.map((column) => selectColumn(dialect, column)).join(", ")} FROM ${table.name}` +
    (conditions.length === 0 ? "" : ` WHERE ${conditions.join(" AND ")}`) +
    // Qualified: PostgreSQL would otherwise order by the select list's `id::text`, which is also named id.
    ` ORDER BY ${key.map((column) => `${table.name}.${column.name}`).join(", ")} LIMIT ${placeholder(params.length)}`
  // In place: a million rows copied into new arrays would double what the collector has to reclaim.
  return Effect.map(sql.unsafe(text, params).values, (rows) => {
    const canonical = rows as Array<Array<unknown>>
    for (const row of canonical) {
      for (let i = 0; i < table.columns.length; i++) row[i] = canonicalValue(table.columns[i]!.kind, row[i])
    }
    return canonical as Array<CanonicalRow>
  })
}

/** The row count of a table (without the rows left out of the move). */
export const countRows = (sql: SqlClient.SqlClient, table: Table) =>
  Effect.map(
    sql.unsafe<{ count: number | string }>(
      `SELECT count(*) AS count FROM ${table.name}${table.where === undefined ? "" : ` WHERE ${table.where}`}`
    ),
    ([row]) => Number(row?.count ?? 0)
  )
