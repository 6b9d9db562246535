import { Array as Arr, Effect } from "effect"
import type { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { once } from "node:events"
import { from as copyFrom } from "pg-copy-streams"
import { pgFailure, type PostgresSession } from "./PostgresSession.js"
import { type CanonicalRow, type Column, type CopiedTable, quoted, sqliteTime } from "./Tables.js"

const columnList = (table: CopiedTable) => table.columns.map((column) => quoted(column.name)).join(", ")

/** COPY's text format: tab between values, `\N` for null, backslash escapes. */
const copyValue = (value: string | null) =>
  value === null ? "\\N" : value.replace(/[\\\t\n\r]/g, (c) => copyEscapes[c]!)

const copyEscapes: Record<string, string> = { "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r" }

/** A table filled by `COPY … FROM STDIN` on the target's session: about three times `INSERT … unnest`'s speed. */
const copyIn = (session: PostgresSession, table: CopiedTable) =>
  Effect.sync(() => {
    const stream = session.client.query(copyFrom(`COPY ${table.name} (${columnList(table)}) FROM STDIN`))
    let failure: Error | undefined
    stream.on("error", (error) => {
      failure = error
    })
    // Each wait for the server to take rows is bounded as a statement is (`PostgresSession.ts`).
    const settled = (event: "drain" | "finish") => once(stream, event).then(() => {})
    const unlessFailed = <A>(effect: () => Effect.Effect<A, SqlError>) =>
      Effect.suspend(() => failure === undefined ? effect() : Effect.fail(pgFailure(failure, "copy")))
    return {
      write: (rows: ReadonlyArray<CanonicalRow>) =>
        unlessFailed(() => {
          let text = ""
          for (const row of rows) text += row.map(copyValue).join("\t") + "\n"
          return stream.write(text) ? Effect.void : session.answer(() => settled("drain"))
        }),
      end: unlessFailed(() =>
        session.answer(() => {
          const finished = settled("finish")
          stream.end()
          return finished
        })
      ),
      // PostgreSQL then fails the COPY, so that the transaction can roll back.
      abort: Effect.asVoid(Effect.sync(() => stream.destroy(new Error("the copy stopped"))))
    }
  })

/** 500 rows a statement: twice one row's speed, where larger is slower again. */
const sqliteRowsPerStatement = 500

const sqliteInsert = (table: CopiedTable, rows: number) =>
  `INSERT INTO ${table.name} (${columnList(table)}) VALUES ` +
  Array.from({ length: rows }, () => `(${table.columns.map(() => "?").join(", ")})`).join(", ")

const sqliteValue = (column: Column, value: string | null) =>
  value === null ? null : column.kind === "integer" ? Number(value) : column.kind === "time" ? sqliteTime(value) : value

/** PostgreSQL's COPY, or SQLite's statements written out: `sql.insert`'s placeholder per value costs more. */
export const tableWriter = (
  sql: SqlClient.SqlClient,
  table: CopiedTable,
  session: PostgresSession | undefined
): ReturnType<typeof copyIn> => {
  if (session !== undefined) return copyIn(session, table)
  const full = sqliteInsert(table, sqliteRowsPerStatement)
  const write = (rows: ReadonlyArray<CanonicalRow>) =>
    Effect.forEach(
      Arr.chunksOf(rows, sqliteRowsPerStatement),
      (chunk) =>
        sql.unsafe(
          chunk.length === sqliteRowsPerStatement ? full : sqliteInsert(table, chunk.length),
          chunk.flatMap((row) => row.map((value, i) => sqliteValue(table.columns[i]!, value)))
        ),
      { discard: true }
    )
  return Effect.succeed({ write, end: Effect.void, abort: Effect.void })
}

/** Runs `fill` with the table's secondary indexes dropped, then made again: one build costs about half the upkeep. */
export const withoutSecondaryIndexes = <A, E, R>(
  sql: SqlClient.SqlClient,
  table: string,
  fill: Effect.Effect<A, E, R>
): Effect.Effect<A, E | unknown, R> =>
  Effect.gen(function*() {
    const indexes = yield* sql.onDialectOrElse({
      pg: () =>
        sql<{ name: string; definition: string }>`SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition
          FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
          WHERE i.indrelid = ${table}::regclass
            AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)`,
      orElse: () =>
        sql<{ name: string; definition: string }>`SELECT name, sql AS definition FROM sqlite_master
          WHERE type = 'index' AND tbl_name = ${table} AND sql IS NOT NULL`
    })
    for (const { name } of indexes) yield* sql.unsafe(`DROP INDEX "${name}"`)
    const result = yield* fill
    for (const { definition } of indexes) yield* sql.unsafe(definition)
    return result
  })
