import { Context, Effect, Layer, Option, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"

const reference = Context.Reference<{ readonly isOn: () => boolean }>("petstore/ReadOnlyMode", {
  // Without a database behind it (the in-memory stores), the service is always writable.
  defaultValue: () => ({ isOn: () => false })
})

/** A move's write stop (a `read_only` setting), read once a second so a request reads memory; a failed read keeps the last. */
export const ReadOnlyMode = Object.assign(reference, {
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

/** After the flag is set: a poll for every instance to read it, as long again for a create that passed the check. */
export const settleMillis = 2_000

export const readOnlySince = (sql: SqlClient.SqlClient): Effect.Effect<Option.Option<Date>, SqlError> =>
  Effect.map(
    sql<{ value: string }>`SELECT value FROM settings WHERE name = 'read_only'`,
    ([row]) => Option.map(Option.fromNullishOr(row), ({ value }) => new Date(value))
  )

/** Turns the store's read-only mode on (keeping the time it was first turned on) or off. */
export const setReadOnly = (sql: SqlClient.SqlClient, on: boolean) =>
  on
    ? sql`INSERT INTO settings (name, value) VALUES ('read_only', ${new Date().toISOString()}) ON CONFLICT DO NOTHING`
    : sql`DELETE FROM settings WHERE name = 'read_only'`
