import { type SqlError, SqlErrorReason } from "effect/sql/SqlError"
import { statementDurationOf, statementFailureCounter } from "../Observability/Metrics.js"
import { statementSummary } from "./StatementSummary.js"

type DatabaseSystem = "sqlite" | "postgresql"

/** A statement's duration recorder, kept by its text for up to 1,000 texts: a histogram made per run would cost. */
export const statementDurations = (system: DatabaseSystem): (sql: string) => (seconds: number) => void => {
  const byText = new Map<string, (seconds: number) => void>()
  return (sql) => {
    let record = byText.get(sql)
    if (record === undefined) {
      const { operation, table } = statementSummary(sql)
      record = statementDurationOf(system, operation, table)
      if (byText.size < 1000) byText.set(sql, record)
    }
    return record
  }
}

/** Every reason effect/sql gives a failed statement (`ConnectionError`, `LockTimeoutError`, `UniqueViolation`, …). */
export const sqlErrorTypes = SqlErrorReason.members.map((reason) => reason.fields._tag.schema.literal)

/** Counts a failed statement (`db_client_operation_errors_total`) by its reason, each reason's series made at 0. */
export const statementFailures = (system: DatabaseSystem): (error: SqlError) => void => {
  const byType = new Map(sqlErrorTypes.map((type) => [type, statementFailureCounter(system, type)]))
  return (error) => byType.get(error.reason._tag)?.()
}
