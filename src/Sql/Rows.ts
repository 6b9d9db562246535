import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"

/**
 * A statement's rows made into its caller's value, a failing statement being a defect (nothing a
 * caller could handle): one step of the fiber where `Effect.orDie(Effect.map(statement, f))` takes
 * four, each about as costly as a small SQLite read's own work. `f` throwing is a defect too.
 */
export const rowsOrDie = <A, B>(
  statement: Effect.Effect<ReadonlyArray<A>, SqlError>,
  f: (rows: ReadonlyArray<A>) => B
): Effect.Effect<B> => Effect.matchEffect(statement, { onFailure: Effect.die, onSuccess: (rows) => Effect.succeed(f(rows)) })
