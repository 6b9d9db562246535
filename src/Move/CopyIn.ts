import { Effect } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import { from as copyFrom } from "pg-copy-streams"
import { type Outcome, pgFailure, type PostgresSession } from "./PostgresSession.js"
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
export const copyIn = (session: PostgresSession, table: CopiedTable): Effect.Effect<CopyIn> =>
  Effect.sync(() => {
    const stream = session.client.query(
      copyFrom(`COPY ${table.name} (${table.columns.map((column) => quoted(column.name)).join(", ")}) FROM STDIN`)
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
