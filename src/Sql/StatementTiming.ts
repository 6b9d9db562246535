import { statementDurationOf, statementSummary } from "../Observability/Metrics.js"
import { cachedByText } from "./TextCache.js"

export type DatabaseSystem = "sqlite" | "postgresql"

type Histogram = ReturnType<typeof statementDurationOf>

/** The duration histogram (`db_client_operation_duration_seconds`) of a statement, found by its text. */
export const statementDurations = (system: DatabaseSystem): (sql: string) => Histogram =>
  cachedByText((sql) => {
    const { operation, table } = statementSummary(sql)
    return statementDurationOf(system, operation, table ?? "")
  })
