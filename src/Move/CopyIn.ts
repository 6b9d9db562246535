import { Effect } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type Pg from "pg"
import { from as copyFrom } from "pg-copy-streams"
import { pgFailure } from "./PostgresSession.js"
import { type CanonicalRow, type CopiedTable, quoted } from "./Tables.js"

/** COPY's text format: tab between values, `\N` for null, backslash escapes. */
const copyValue = (value: string | null) =>
  value === null ? "\\N" : /[\\\t\n\r]/.test(value) ? value.replace(/[\\\t\n\r]/g, (c) => copyEscapes[c]!) : value

const copyEscapes: Record<string, string> = { "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r" }

export interface CopyIn {
  readonly write: (rows: ReadonlyArray<CanonicalRow>) => Effect.Effect<void, SqlError>
  readonly end: Effect.Effect<void, SqlError>
  /** Stops the COPY (PostgreSQL then fails it), so that the transaction can roll back. */
  readonly abort: Effect.Effect<void>
}

/**
 * A table filled through PostgreSQL's `COPY … FROM STDIN` on the session of the target's
 * transaction (`PostgresSession.ts`): about three times faster than `INSERT … SELECT FROM
 * unnest(…)` here (0.55 s against 1.6 s for 200,000 pets). Rows are written as they come and
 * PostgreSQL takes them while the next page is read.
 */
export const copyIn = (client: Pg.Client, table: CopiedTable): Effect.Effect<CopyIn> =>
  Effect.sync(() => {
    const stream = client.query(copyFrom(`COPY ${table.name} (${table.columns.map((column) => quoted(column.name)).join(", ")}) FROM STDIN`))
    let failure: Error | undefined
    stream.on("error", (error) => {
      failure = error
    })
    const failed = () => pgFailure(failure, "copy")
    return {
      write: (rows) =>
        Effect.callback<void, SqlError>((resume) => {
          if (failure !== undefined) return resume(Effect.fail(failed()))
          let text = ""
          for (const row of rows) text += row.map(copyValue).join("\t") + "\n"
          if (stream.write(text)) return resume(Effect.void)
          const onDrain = () => {
            stream.off("error", onError)
            resume(Effect.void)
          }
          const onError = () => {
            stream.off("drain", onDrain)
            resume(Effect.fail(failed()))
          }
          stream.once("drain", onDrain)
          stream.once("error", onError)
        }),
      end: Effect.callback<void, SqlError>((resume) => {
        if (failure !== undefined) return resume(Effect.fail(failed()))
        stream.once("finish", () => resume(Effect.void))
        stream.once("error", () => resume(Effect.fail(failed())))
        stream.end()
      }),
      abort: Effect.sync(() => stream.destroy(new Error("the copy stopped")))
    }
  })
