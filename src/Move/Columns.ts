import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import { describeStoreFailure, MoveError, type Store } from "./Store.js"
import { type Column, type ColumnKind, type CopiedTable, tables } from "./Tables.js"

/**
 * What a column holds, as one engine declares it: SQLite keeps times as text, so its text column
 * is `time or text`, and a time is known by PostgreSQL's side of the copy.
 */
type DeclaredKind = ColumnKind | "time or text"

/** A column as a database's catalogue describes it. */
interface CatalogueColumn {
  readonly name: string
  readonly type: string
  /** What its declared type holds; undefined for a type the move does not carry. */
  readonly kind: DeclaredKind | undefined
  /** Its position in the primary key, from 1; 0 when not part of it. */
  readonly key: number
}

/** SQLite's rules for a declared type's affinity: INTEGER and TEXT are the ones the service's tables use. */
const sqliteKind = (type: string): DeclaredKind | undefined =>
  /INT/i.test(type) ? "integer" : /CHAR|CLOB|TEXT/i.test(type) ? "time or text" : undefined

const postgresKind = (type: string): DeclaredKind | undefined =>
  /^(bigint|integer|smallint)$/.test(type)
    ? "integer"
    : /^(text|character varying|character)\b/.test(type)
    ? "text"
    : type === "timestamp with time zone"
    ? "time"
    : undefined

/**
 * A table's columns in their declared order, from the database itself: SQLite's `table_info`,
 * PostgreSQL's `pg_attribute` (the table in the connection's search path, as every statement
 * of the move names it).
 */
const columnsOf = (sql: SqlClient.SqlClient, table: string): Effect.Effect<ReadonlyArray<CatalogueColumn>, unknown> =>
  sql.onDialectOrElse({
    pg: () =>
      Effect.map(
        sql<{ name: string; type: string; key: number | string | null }>`
          SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type,
            (SELECT position FROM pg_index k, unnest(k.indkey::int2[]) WITH ORDINALITY AS p(attnum, position)
              WHERE k.indrelid = a.attrelid AND k.indisprimary AND p.attnum = a.attnum) AS key
          FROM pg_attribute a
          WHERE a.attrelid = ${table}::regclass AND a.attnum > 0 AND NOT a.attisdropped
          ORDER BY a.attnum`,
        (rows) => rows.map(({ key, name, type }) => ({ name, type, kind: postgresKind(type), key: Number(key ?? 0) }))
      ),
    orElse: () =>
      Effect.map(
        sql<
          { name: string; type: string; key: number }
        >`SELECT name, type, pk AS key FROM pragma_table_info(${table}) ORDER BY cid`,
        (rows) => rows.map(({ key, name, type }) => ({ name, type, kind: sqliteKind(type), key: Number(key) }))
      )
  })

/** The kind both sides' values are read and compared in, or why there is none. */
const commonKind = (
  source: CatalogueColumn,
  target: CatalogueColumn
): { readonly kind: ColumnKind } | { readonly problem: string } => {
  if (source.kind === undefined || target.kind === undefined) {
    const [side, type] = source.kind === undefined ? ["source", source.type] : ["target", target.type]
    return { problem: `has type ${type} on the ${side}, which the move does not carry (integers, text and times)` }
  }
  const kinds = new Set([source.kind, target.kind])
  if (kinds.size === 1) return { kind: source.kind === "time or text" ? "text" : source.kind }
  // SQLite's text holds what the other side's type says: a time, or text.
  if (kinds.has("time or text") && !kinds.has("integer")) return { kind: kinds.has("time") ? "time" : "text" }
  return { problem: `is ${source.type} on the source but ${target.type} on the target` }
}

/** A side of a copy or verify: the open database and the store it is. */
export interface Side {
  readonly sql: SqlClient.SqlClient
  readonly store: Store
}

/**
 * Every table the move copies with its columns, as both databases hold them, so that the copy
 * writes and verify checksums every column there is: none is left out because this build did not
 * list it. Refuses, in one line naming each table and column, a column only one side holds (on a
 * copy, whose target this build's migrations made, that is a source column this build's schema
 * does not know), or one whose values the move cannot carry or compare. `action` is what was not
 * done then.
 */
export const columnsOnBothSides = (
  source: Side,
  target: Side,
  action: "copied" | "compared"
): Effect.Effect<ReadonlyArray<CopiedTable>, MoveError> =>
  Effect.gen(function*() {
    const problems: Array<string> = []
    const copied: Array<CopiedTable> = []
    for (const table of tables) {
      const onSource = yield* Effect.mapError(columnsOf(source.sql, table.name), (error) =>
        describeStoreFailure(source.store, "source", error))
      const onTarget = yield* Effect.mapError(columnsOf(target.sql, table.name), (error) =>
        describeStoreFailure(target.store, "target", error))
      const targetColumns = new Map(onTarget.map((column) => [column.name, column]))
      const sourceNames = new Set(onSource.map((column) =>
        column.name
      ))
      const columns: Array<Column & { readonly key: number }> = []
      for (const column of onSource) {
        const targetColumn = targetColumns.get(column.name)
        if (targetColumn === undefined) {
          problems.push(`the target has no ${table.name}.${column.name}`)
          continue
        }
        const common = commonKind(column, targetColumn)
        if ("kind" in common) {
          columns.push({ name: column.name, kind: common.kind, key: column.key })
        } else problems.push(`${table.name}.${column.name} ${common.problem}`)
      }
      for (const column of onTarget) {
        if (!sourceNames.has(column.name)) {
          problems.push(`the source has no ${table.name}.${column.name}`)
        }
      }
      const key = columns.filter((column) =>
        column.key > 0
      ).sort((a, b) => a.key - b.key)
      if (key.length === 0 && onSource.length > 0) problems.push(`${table.name} has no primary key on the source`)
      copied.push({
        ...table,
        columns: [...key, ...columns.filter((column) => column.key === 0)].map(({ kind, name }) => ({ name, kind })),
        keyLength: key.length
      })
    }
    if (problems.length > 0) {
      return yield* new MoveError({
        message: `source ${source.store.label} and target ${target.store.label}` +
          `${action === "copied" ? " (made by this build's migrations)" : ""} do not have the same columns: ` +
          `${problems.join("; ")}; nothing was ${action}`
      })
    }
    return copied
  })
