import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import { requireKnownVersion } from "./SchemaVersion.js"
import { connect, failingAs, MoveError, type Store } from "./Store.js"
import { type CanonicalRow, type Column, type ColumnKind, type CopiedTable, forEachPage, tables } from "./Tables.js"

/** Row count and sum mod 2^64 of row hashes: any read order, and equal rows do not cancel out as with XOR. */
export class Checksum {
  rows = 0
  sum = 0n

  add(rows: ReadonlyArray<CanonicalRow>): void {
    let sum = this.sum
    for (const row of rows) {
      // Each value's length before it, and null apart from "": a string no other row gives.
      let text = ""
      for (const value of row) text += value === null ? "N" : `${value.length}:${value}`
      sum += BigInt(Bun.hash(text))
    }
    this.sum = BigInt.asUintN(64, sum)
    this.rows += rows.length
  }
}

/** What a column holds as one engine declares it: SQLite keeps times as text, known by the other side's type. */
type DeclaredKind = ColumnKind | "time or text"

/** A column as a catalogue has it: `kind` undefined for a type the move does not carry; `key` from 1 in the key. */
type CatalogueColumn = Readonly<{ name: string; type: string; kind: DeclaredKind | undefined; key: number }>

const postgresKinds: ReadonlyArray<readonly [RegExp, ColumnKind]> = [
  [/^(bigint|integer|smallint)$/, "integer"],
  [/^(text|character varying|character)\b/, "text"],
  [/^timestamp with time zone$/, "time"]
]

/** A declared type's kind; SQLite's by its affinity rules, INTEGER and TEXT being the ones the service's tables use. */
const declaredKind = (sql: SqlClient.SqlClient, type: string): DeclaredKind | undefined =>
  sql.onDialectOrElse({
    pg: () => postgresKinds.find(([pattern]) => pattern.test(type))?.[1],
    orElse: () => /INT/i.test(type) ? "integer" : /CHAR|CLOB|TEXT/i.test(type) ? "time or text" : undefined
  })

/** A table's columns in their declared order, from the catalogue (PostgreSQL's: the table in the search path). */
const columnsOf = (sql: SqlClient.SqlClient, table: string): Effect.Effect<ReadonlyArray<CatalogueColumn>, unknown> =>
  Effect.map(
    sql.onDialectOrElse({
      pg: () =>
        sql<{ name: string; type: string; key: number | string | null }>`
          SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type,
            (SELECT position FROM pg_index k, unnest(k.indkey::int2[]) WITH ORDINALITY AS p(attnum, position)
              WHERE k.indrelid = a.attrelid AND k.indisprimary AND p.attnum = a.attnum) AS key
          FROM pg_attribute a
          WHERE a.attrelid = ${table}::regclass AND a.attnum > 0 AND NOT a.attisdropped
          ORDER BY a.attnum`,
      orElse: () =>
        sql<{ name: string; type: string; key: number }>`
          SELECT name, type, pk AS key FROM pragma_table_info(${table}) ORDER BY cid`
    }),
    (rows) => rows.map(({ key, name, type }) => ({ name, type, kind: declaredKind(sql, type), key: Number(key ?? 0) }))
  )

/** The kind both sides' values are read and compared in, or why there is none. */
const commonKind = (source: CatalogueColumn, target: CatalogueColumn): ColumnKind | { readonly problem: string } => {
  if (source.kind === undefined || target.kind === undefined) {
    const [side, type] = source.kind === undefined ? ["source", source.type] : ["target", target.type]
    return { problem: `has type ${type} on the ${side}, which the move does not carry (integers, text and times)` }
  }
  const kinds = new Set([source.kind, target.kind])
  if (kinds.size === 1) return source.kind === "time or text" ? "text" : source.kind
  // SQLite's text holds what the other side's type says: a time, or text.
  if (kinds.has("time or text") && !kinds.has("integer")) return kinds.has("time") ? "time" : "text"
  return { problem: `is ${source.type} on the source but ${target.type} on the target` }
}

export type Side = { readonly sql: SqlClient.SqlClient; readonly store: Store }

/** Every table the move copies, with every column both sides hold; a column only one holds, or not carried, refused. */
export const columnsOnBothSides = (
  source: Side,
  target: Side,
  action: "copied" | "compared"
): Effect.Effect<ReadonlyArray<CopiedTable>, MoveError> =>
  Effect.gen(function*() {
    const problems: Array<string> = []
    const copied: Array<CopiedTable> = []
    for (const table of tables) {
      const read = (side: Side, role: string) => failingAs(side.store, role)(columnsOf(side.sql, table.name))
      const onSource = yield* read(source, "source")
      const onTarget = new Map((yield* read(target, "target")).map((column) => [column.name, column]))
      const columns: Array<Column & { readonly key: number }> = []
      for (const column of onSource) {
        const targetColumn = onTarget.get(column.name)
        onTarget.delete(column.name)
        const common = targetColumn === undefined ? undefined : commonKind(column, targetColumn)
        if (common === undefined) problems.push(`the target has no ${table.name}.${column.name}`)
        else if (typeof common === "string") columns.push({ name: column.name, kind: common, key: column.key })
        else problems.push(`${table.name}.${column.name} ${common.problem}`)
      }
      for (const name of onTarget.keys()) problems.push(`the source has no ${table.name}.${name}`)
      const key = columns.filter((column) => column.key > 0).sort((a, b) => a.key - b.key)
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

/** Runs `effect` in one snapshot: PostgreSQL's REPEATABLE READ, SQLite's read transaction, stable under WAL. */
export const inSnapshot = <A, E, R>(sql: SqlClient.SqlClient, effect: Effect.Effect<A, E, R>) =>
  sql.withTransaction(Effect.andThen(
    sql.onDialectOrElse({
      pg: () => Effect.asVoid(sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`),
      orElse: () => Effect.void
    }),
    effect
  ))

/** Each copied table's row count and checksum, read from the store as it is (callers choose the snapshot). */
export const checksums = (
  sql: SqlClient.SqlClient,
  copied: ReadonlyArray<CopiedTable>,
  onRows: (rows: number) => void = () => {}
) =>
  Effect.gen(function*() {
    const sums = new Map(copied.map((table) => [table.name, new Checksum()]))
    for (const table of copied) {
      const checksum = sums.get(table.name)!
      yield* forEachPage(sql, table, (rows) =>
        Effect.sync(() => {
          checksum.add(rows)
          onRows(rows.length)
        }))
    }
    return sums
  })

export const compare = (source: ReadonlyMap<string, Checksum>, target: ReadonlyMap<string, Checksum>) => {
  const row = (cells: ReadonlyArray<string>) =>
    cells.map((cell, i) => (i === 0 ? cell.padEnd(18) : cell.padStart(i < 3 ? 12 : 18))).join("  ")
  const lines = [row(["table", "source rows", "target rows", "source checksum", "target checksum", "   "])]
  const differing: Array<string> = []
  const hex = (checksum: Checksum) => checksum.sum.toString(16).padStart(16, "0")
  for (const { name } of tables) {
    const [a, b] = [source.get(name) ?? new Checksum(), target.get(name) ?? new Checksum()]
    const same = a.rows === b.rows && a.sum === b.sum
    if (!same) differing.push(name)
    lines.push(row([name, String(a.rows), String(b.rows), hex(a), hex(b), same ? " ok" : " DIFFERENT"]))
  }
  return { lines, differing }
}

/** `db verify`: both stores' counts and checksums over every column, each in its own snapshot. */
export const verify = (from: Store, to: Store) =>
  Effect.gen(function*() {
    const [onSource, onTarget] = [failingAs(from, "source"), failingAs(to, "target")]
    const source = yield* connect(from, { role: "source", mode: "read" })
    const target = yield* connect(to, { role: "target", mode: "read" })
    yield* onSource(requireKnownVersion(source, from, "source"))
    yield* onTarget(requireKnownVersion(target, to, "target"))
    const copied = yield* columnsOnBothSides({ sql: source, store: from }, { sql: target, store: to }, "compared")
    const startedAt = performance.now()
    const sourceSums = yield* onSource(inSnapshot(source, checksums(source, copied)))
    const targetSums = yield* onTarget(inSnapshot(target, checksums(target, copied)))
    return { ...compare(sourceSums, targetSums), seconds: (performance.now() - startedAt) / 1000 }
  }).pipe(Effect.scoped)
