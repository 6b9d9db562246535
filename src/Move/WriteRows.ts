import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { from as copyFrom } from "pg-copy-streams"
import { type Outcome, pgFailure, type PostgresSession } from "./PostgresSession.js"
import { type CanonicalRow, type Column, type CopiedTable, quoted, sqliteTime } from "./Tables.js"

/** COPY's text format: tab between values, `\N` for null, backslash escapes. */
const copyValue = (value: string | null) =>
  value === null ? "\\N" : /[\\\t\n\r]/.test(value) ? value.replace(/[\\\t\n\r]/g, (c) => copyEscapes[c]!) : value

const copyEscapes: Record<string, string> = { "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r" }

interface CopyIn {
  readonly write: (rows: ReadonlyArray<CanonicalRow>) => Effect.Effect<void, SqlError>
  readonly end: Effect.Effect<void, SqlError>
  /** Stops the COPY (PostgreSQL then fails it), so that the transaction can roll back. */
  readonly abort: Effect.Effect<void>
}

/** A table filled by `COPY … FROM STDIN` in the target's transaction: about three times `INSERT … unnest`'s speed. */
const copyIn = (session: PostgresSession, table: CopiedTable): Effect.Effect<CopyIn> =>
  Effect.sync(() => {
    const stream = session.client.query(
      copyFrom(`COPY ${table.name} (${columnList(table)}) FROM STDIN`)
    )
    let failure: Error | undefined
    stream.on("error", (error) => {
      failure = error
    })
    // Each wait for the server to take rows is bounded as a statement is (`PostgresSession.ts`).
    const settled = (event: "drain" | "finish") => (done: (outcome: Outcome<void>) => void) => {
      const onEvent = () => {
        stream.off("error", onError)
        done({ ok: true, value: undefined })
      }
      const onError = (error: Error) => {
        stream.off(event, onEvent)
        done({ ok: false, error })
      }
      stream.once(event, onEvent)
      stream.once("error", onError)
    }
    const failed = () => Effect.fail(pgFailure(failure, "copy"))
    return {
      write: (rows) =>
        Effect.suspend(() => {
          if (failure !== undefined) return failed()
          let text = ""
          for (const row of rows) text += row.map(copyValue).join("\t") + "\n"
          return stream.write(text) ? Effect.void : session.answer(settled("drain"))
        }),
      end: Effect.suspend(() =>
        failure !== undefined ? failed() : session.answer<void>((done) => {
          settled("finish")(done)
          stream.end()
        })
      ),
      abort: Effect.sync(() => stream.destroy(new Error("the copy stopped")))
    }
  })

/**
 * Pages of canonical rows written in as few statements as the engine allows (`sql.insert`'s
 * placeholder per value costs several times the insert): PostgreSQL one `INSERT … SELECT FROM
 * unnest(…)` per page, one array per column; SQLite 500 rows a statement (twice one row's speed;
 * larger is slower again).
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
  const rest = table.columns.slice(table.keyLength).map(({ name }) => `${quoted(name)} = excluded.${quoted(name)}`)
  return ` ON CONFLICT (${key.join(", ")}) DO UPDATE SET ${rest.join(", ")}`
}

const postgresInsert = (table: CopiedTable) => {
  const arrays = table.columns.map((column, i) => `$${i + 1}::${postgresTypes[column.kind]}[]`)
  // OVERRIDING SYSTEM VALUE: the ids are the source's, not new ones from the identity.
  const overriding = table.sequence === undefined ? "" : "OVERRIDING SYSTEM VALUE "
  return `INSERT INTO ${table.name} (${columnList(table)}) ${overriding}SELECT * FROM unnest(${arrays.join(", ")})` +
    conflict(table)
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
 * session (`copyClient`) when the table takes plain inserts, else `rowWriter`.
 */
export const tableWriter = (
  sql: SqlClient.SqlClient,
  table: CopiedTable,
  copyClient: PostgresSession | undefined
): Effect.Effect<CopyIn> =>
  copyClient !== undefined && table.upsert !== true
    ? copyIn(copyClient, table)
    : Effect.sync(() => ({ write: rowWriter(sql, table), end: Effect.void, abort: Effect.void }))

type Index = { readonly name: string; readonly definition: string }

/** The secondary indexes of a table (none behind a constraint), with the statement that makes each, from the engine. */
const secondaryIndexes = (sql: SqlClient.SqlClient, table: string): Effect.Effect<ReadonlyArray<Index>, unknown> =>
  sql.onDialectOrElse({
    pg: () =>
      sql<Index>`SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition
        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = ${table}::regclass
          AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)`,
    orElse: () =>
      sql<Index>`SELECT name, sql AS definition FROM sqlite_master
        WHERE type = 'index' AND tbl_name = ${table} AND sql IS NOT NULL`
  })

/** Runs `fill` with the table's secondary indexes dropped, then made again: one build costs about half the upkeep. */
export const withoutSecondaryIndexes = <A, E, R>(
  sql: SqlClient.SqlClient,
  table: string,
  fill: Effect.Effect<A, E, R>
): Effect.Effect<A, E | unknown, R> =>
  Effect.gen(function*() {
    const indexes = yield* secondaryIndexes(sql, table)
    for (const { name } of indexes) yield* sql.unsafe(`DROP INDEX "${name}"`)
    const result = yield* fill
    for (const { definition } of indexes) yield* sql.unsafe(definition)
    return result
  })
