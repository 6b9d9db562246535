import type { Connection } from "@effect/sql/SqlConnection"
import { Effect } from "effect"
import { statementDurationOf, statementSummary } from "../Observability/Metrics.js"

export type DatabaseSystem = "sqlite" | "postgresql"

type Histogram = ReturnType<typeof statementDurationOf>

/**
 * The duration histogram (`db_client_operation_duration_seconds`) of a statement, found by its
 * text: the service's statements are parameterised, so few; the cap guards against any other.
 */
export const statementDurations = (system: DatabaseSystem) => {
  const byText = new Map<string, Histogram>()
  return (sql: string): Histogram => {
    let histogram = byText.get(sql)
    if (histogram === undefined) {
      const { operation, table } = statementSummary(sql)
      histogram = statementDurationOf(system, operation, table ?? "")
      if (byText.size < 1000) byText.set(sql, histogram)
    }
    return histogram
  }
}

/**
 * A connection whose statements are timed, failed ones too: the one place between `@effect/sql`
 * and a driver's connection where every statement passes.
 */
export const timedConnection = (system: DatabaseSystem, connection: Connection): Connection => {
  const durationOf = statementDurations(system)
  const timed = <A, E>(sql: string, run: Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.suspend(() => {
      const start = performance.now()
      return Effect.onExit(run, () => Effect.sync(() => durationOf(sql).unsafeUpdate((performance.now() - start) / 1000, [])))
    })
  return {
    execute: (sql, params, transformRows) => timed(sql, connection.execute(sql, params, transformRows)),
    executeRaw: (sql, params) => timed(sql, connection.executeRaw(sql, params)),
    executeValues: (sql, params) => timed(sql, connection.executeValues(sql, params)),
    executeUnprepared: (sql, params, transformRows) => timed(sql, connection.executeUnprepared(sql, params, transformRows)),
    executeStream: (sql, params, transformRows) => connection.executeStream(sql, params, transformRows)
  }
}
