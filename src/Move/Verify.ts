import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import { Checksum } from "./Checksum.js"
import { columnsOnBothSides } from "./Columns.js"
import { requireKnownVersion } from "./SchemaVersion.js"
import { connect, describeStoreFailure, type Store } from "./Store.js"
import { type CanonicalRow, type CopiedTable, pageReader, tables } from "./Tables.js"

/** Rows per page read; a page of pets is a few MiB in memory. */
export const batchSize = 2_000

/**
 * Runs `effect` in one consistent snapshot of the store: PostgreSQL's REPEATABLE READ, read-only;
 * SQLite's read transaction, which WAL keeps stable while the service goes on writing.
 */
export const inSnapshot = <A, E, R>(sql: SqlClient.SqlClient, effect: Effect.Effect<A, E, R>) =>
  sql.withTransaction(
    Effect.andThen(
      sql.onDialectOrElse({
        pg: () => Effect.asVoid(sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`),
        orElse: () => Effect.void
      }),
      effect
    )
  )

/**
 * A turn of the event loop: reads from SQLite and writes to a socket that keeps up never wait, and
 * without it a signal or a deadline's timer would go unheard until the table's end.
 */
const nextTurn = Effect.callback<void>((resume) => {
  const turn = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(turn))
})

/**
 * Every page of a table in key order, handed to `onPage`; the next page is read while `onPage`
 * works on the current one, so one engine's work overlaps the other's.
 */
export const forEachPage = <E, R>(
  sql: SqlClient.SqlClient,
  table: CopiedTable,
  onPage: (rows: Array<CanonicalRow>) => Effect.Effect<void, E, R>
): Effect.Effect<void, unknown, R> => {
  const read = pageReader(sql, table, batchSize)
  const loop = (rows: Array<CanonicalRow>): Effect.Effect<void, unknown, R> =>
    rows.length < batchSize
      ? onPage(rows)
      : Effect.flatMap(
        Effect.zip(onPage(rows), Effect.andThen(nextTurn, read(rows[rows.length - 1])), { concurrent: true }),
        ([, next]) => loop(next)
      )
  return Effect.flatMap(read(undefined), loop)
}

/**
 * Each copied table's row count and checksum over every column both sides hold, read from the
 * store as it is (callers choose the snapshot).
 */
export const checksums = (
  sql: SqlClient.SqlClient,
  copied: ReadonlyArray<CopiedTable>,
  onRows: (rows: number) => void = () => {}
) =>
  Effect.forEach(copied, (table) =>
    Effect.gen(function*() {
      const checksum = new Checksum()
      yield* forEachPage(sql, table, (rows) =>
        Effect.sync(() => {
          checksum.add(rows)
          onRows(rows.length)
        }))
      return [table.name, checksum] as const
    })).pipe(Effect.map((entries) => new Map(entries)))

export interface Comparison {
  readonly lines: ReadonlyArray<string>
  /** The tables whose count or checksum differ. */
  readonly differing: ReadonlyArray<string>
}

/** The per-table comparison, as the table the command prints. */
export const compare = (source: ReadonlyMap<string, Checksum>, target: ReadonlyMap<string, Checksum>): Comparison => {
  const row = (cells: ReadonlyArray<string>) =>
    cells.map((cell, i) => (i === 0 ? cell.padEnd(18) : cell.padStart(i < 3 ? 12 : 18))).join("  ")
  const lines = [row(["table", "source rows", "target rows", "source checksum", "target checksum", "   "])]
  const differing: Array<string> = []
  for (const { name } of tables) {
    const a = source.get(name) ?? new Checksum()
    const b = target.get(name) ?? new Checksum()
    const same = a.equals(b)
    if (!same) differing.push(name)
    lines.push(row([name, String(a.rows), String(b.rows), a.hex, b.hex, same ? " ok" : " DIFFERENT"]))
  }
  return { lines, differing }
}

/**
 * `db verify`: both stores' counts and checksums over every column, each read in its own
 * snapshot, compared; fails naming every table that differs. Stores whose tables do not have the
 * same columns are refused before anything is read.
 */
export const verify = (from: Store, to: Store) =>
  Effect.gen(function*() {
    const onSource = Effect.mapError((error: unknown) => describeStoreFailure(from, "source", error))
    const onTarget = Effect.mapError((error: unknown) => describeStoreFailure(to, "target", error))
    const source = yield* connect(from, { role: "source", mode: "read" })
    const target = yield* connect(to, { role: "target", mode: "read" })
    yield* onSource(requireKnownVersion(source, from, "source"))
    yield* onTarget(requireKnownVersion(target, to, "target"))
    const copied = yield* columnsOnBothSides({ sql: source, store: from }, { sql: target, store: to }, "compared")
    const startedAt = performance.now()
    const sourceSums = yield* onSource(inSnapshot(source, checksums(source, copied)))
    const targetSums = yield* onTarget(inSnapshot(target, checksums(target, copied)))
    const comparison = compare(sourceSums, targetSums)
    const seconds = (performance.now() - startedAt) / 1000
    return { ...comparison, seconds }
  }).pipe(Effect.scoped)
