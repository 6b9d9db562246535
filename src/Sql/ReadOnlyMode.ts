import { Context, Effect, Layer, Option, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"

/** Whether the store refuses writes now. */
export interface ReadOnlyMode {
  readonly isOn: () => boolean
}

const reference = Context.Reference<ReadOnlyMode>("petstore/ReadOnlyMode", {
  // Without a database behind it (the in-memory stores), the service is always writable.
  defaultValue: () => ({ isOn: () => false })
})

/**
 * The write stop of a move: a `read_only` row in the database's `settings` table (its value: when
 * it was turned on). Every instance reads it once a second in the background, so a request only
 * reads a flag in memory; a read that fails keeps the last answer. While it is on, creates answer
 * 503 `read_only` and reads are served.
 */
export const ReadOnlyMode: typeof reference & {
  readonly layer: Layer.Layer<never, never, SqlClient.SqlClient>
} = Object.assign(reference, {
  layer: Layer.effect(
    reference,
    Effect.gen(function*() {
      const read = Effect.map(readOnlySince(yield* SqlClient.SqlClient), Option.isSome)
      let on = yield* Effect.orElseSucceed(read, () => false)
      yield* read.pipe(
        Effect.tap((now) => Effect.sync(() => (on = now))),
        Effect.ignore,
        Effect.repeat(Schedule.spaced("1 second")),
        Effect.forkScoped
      )
      return { isOn: () => on }
    })
  )
})

/**
 * How long after the flag is set every instance has refused writes for a while: a poll interval
 * for all of them to read it, and as long again for a create that passed the check just before.
 */
export const settleMillis = 2_000

/** When the store's read-only mode was turned on, if it is on. */
export const readOnlySince = (sql: SqlClient.SqlClient): Effect.Effect<Option.Option<Date>, SqlError> =>
  Effect.map(
    sql<{ value: string }>`SELECT value FROM settings WHERE name = 'read_only'`,
    ([row]) => Option.map(Option.fromNullishOr(row), ({ value }) => new Date(value))
  )

/** Turns the store's read-only mode on (keeping the time it was first turned on) or off. */
export const setReadOnly = (sql: SqlClient.SqlClient, on: boolean) =>
  on
    ? sql`INSERT INTO settings (name, value) VALUES ('read_only', ${
      new Date().toISOString()
    }) ON CONFLICT (name) DO NOTHING`
    : sql`DELETE FROM settings WHERE name = 'read_only'`
