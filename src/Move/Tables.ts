import { Effect } from "effect"
import type { SqlClient } from "effect/sql"

/** How a column's value is written in canonical form, the same whatever the engine it came from. */
export type ColumnKind = "integer" | "text" | "time"

export type Column = { readonly name: string; readonly kind: ColumnKind }

export interface Table {
  readonly name: string
  /** Rows left out of the move. */
  readonly where?: string
  /** The identity/AUTOINCREMENT column whose next value must stay above every copied id. */
  readonly sequence?: string
  /** Rows the target's own migrations already put there, deleted before the source's are copied. */
  readonly replaced?: boolean
}

/** What the move copies, in foreign keys' order; not the rate-limit buckets, the migrations, the `read_only` setting. */
export const tables: ReadonlyArray<Table> = [
  { name: "pets", sequence: "id" },
  { name: "api_keys", sequence: "id" },
  { name: "settings", where: "name <> 'read_only'", replaced: true },
  { name: "idempotency_keys" }
]

/** A table with every column both databases hold: the primary key's first (`keyLength` of them), then the others. */
export interface CopiedTable extends Table {
  readonly columns: ReadonlyArray<Column>
  readonly keyLength: number
}

/** A column's name as SQL text: quoted, since the catalogue, not this build, named it. */
export const quoted = (name: string) => `"${name.replaceAll(`"`, `""`)}"`

/** A row in canonical form: every value as text (or null), so both engines' rows compare equal. */
export type CanonicalRow = Array<string | null>

const selectColumn = (dialect: "pg" | "sqlite", column: Column) =>
  dialect === "pg" && column.kind === "time"
    ? `to_char(${quoted(column.name)} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`
    : dialect === "pg" && column.kind === "integer"
    ? `${quoted(column.name)}::text`
    : quoted(column.name)

const timePattern = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?Z$/

/** A time as ISO 8601 in UTC with microseconds: PostgreSQL keeps microseconds, the service writes milliseconds. */
const canonicalTime = (text: string): string => {
  const match = timePattern.exec(text)
  if (match !== null) return `${match[1]}.${(match[2] ?? "").padEnd(6, "0")}Z`
  const date = new Date(text)
  return Number.isNaN(date.getTime()) ? text : `${date.toISOString().slice(0, 23)}000Z`
}

/** A canonical time as the service writes it into SQLite: milliseconds unless there is more. */
export const sqliteTime = (canonical: string): string =>
  canonical.endsWith("000Z") ? `${canonical.slice(0, -4)}Z` : canonical

const canonicalValue = (kind: ColumnKind, value: unknown): string | null =>
  value === null || value === undefined ? null : kind === "time" ? canonicalTime(String(value)) : String(value)

/** A table's pages of canonical rows in key order after the previous page's last row: an index range scan each. */
const pageReader = (sql: SqlClient.SqlClient, table: CopiedTable) => {
  const dialect = sql.onDialectOrElse({ pg: () => "pg" as const, orElse: () => "sqlite" as const })
  const key = table.columns.slice(0, table.keyLength)
  const statement = (paged: boolean) => {
    const conditions: Array<string> = table.where === undefined ? [] : [table.where]
    if (paged) {
      const names = key.map((column) => quoted(column.name))
      const values = key.map((column, i) =>
        dialect === "pg" ? `$${i + 1}${column.kind === "integer" ? "::bigint" : ""}` : "?"
      )
      conditions.push(`(${names.join(", ")}) > (${values.join(", ")})`)
    }
    return `SELECT ${table.columns.map((column) => selectColumn(dialect, column)).join(", ")} FROM ${table.name}` +
      (conditions.length === 0 ? "" : ` WHERE ${conditions.join(" AND ")}`) +
      // Qualified: PostgreSQL would otherwise order by the select list's `id::text`, which is also named id.
      ` ORDER BY ${key.map((column) => `${table.name}.${quoted(column.name)}`).join(", ")} LIMIT ${batchSize}`
  }
  const [first, next] = [statement(false), statement(true)]
  const kinds = table.columns.map((column) => column.kind)
  return (after: CanonicalRow | undefined) => {
    const params = after === undefined
      ? []
      : key.map((column, i) => (column.kind === "integer" && dialect === "sqlite" ? Number(after[i]) : after[i]))
    // In place: a million rows copied into new arrays would double what the collector has to reclaim.
    return Effect.map(sql.unsafe(after === undefined ? first : next, params).values, (rows) => {
      const canonical = rows as Array<Array<unknown>>
      for (const row of canonical) {
        for (let i = 0; i < kinds.length; i++) row[i] = canonicalValue(kinds[i]!, row[i])
      }
      return canonical as Array<CanonicalRow>
    })
  }
}

/** Rows per page read; a page of pets is a few MiB in memory. */
const batchSize = 2_000

/** Every page of a table in key order, the next read while `onPage` works on this one: the engines' work overlaps. */
export const forEachPage = <E, R>(
  sql: SqlClient.SqlClient,
  table: CopiedTable,
  onPage: (rows: Array<CanonicalRow>) => Effect.Effect<void, E, R>
): Effect.Effect<void, unknown, R> => {
  const read = pageReader(sql, table)
  const loop = (rows: Array<CanonicalRow>): Effect.Effect<void, unknown, R> =>
    rows.length < batchSize
      ? onPage(rows)
      : Effect.flatMap(
        // A turn of the event loop between pages: SQLite's reads never wait, and a signal would go unheard.
        Effect.zip(onPage(rows), Effect.andThen(Effect.yieldNow, read(rows[rows.length - 1])), { concurrent: true }),
        ([, next]) => loop(next)
      )
  return Effect.flatMap(read(undefined), loop)
}

export const movedRows = (table: Table) =>
  `FROM ${quoted(table.name)}${table.where === undefined ? "" : ` WHERE ${table.where}`}`

export const countRows = (sql: SqlClient.SqlClient, table: Table) =>
  Effect.map(
    sql.unsafe<{ count: number | string }>(`SELECT count(*) AS count ${movedRows(table)}`),
    ([row]) => Number(row?.count ?? 0)
  )
