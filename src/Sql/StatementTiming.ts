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
