import { type Effect, type Exit, Fiber } from "effect"
import type { SqlClient } from "effect/sql"
import { inSampledSpan, startChildSpan } from "../Observability/Tracing.js"
import { statementSummary } from "./StatementSummary.js"

/** A sampled statement's span, started as it starts so that `BEGIN` and `COMMIT` have one too; answers how to end it. */
export const startStatementSpan = (
  system: string,
  sql: string
): ((exit: Exit.Exit<unknown, unknown>) => void) | undefined => {
  const fiber = Fiber.getCurrent()
  // Checked first: an unsampled statement's text is not read.
  if (fiber === undefined || fiber.cache.span === undefined || !fiber.cache.tracerEnabled) return undefined
  const { name, operation, table } = statementSummary(sql)
  const child = startChildSpan(fiber, name, "client")
  if (child === undefined) return undefined
  child.span.attribute("db.system.name", system)
  child.span.attribute("db.system", system)
  child.span.attribute("db.query.text", sql)
  child.span.attribute("db.operation.name", operation)
  if (table !== undefined) child.span.attribute("db.collection.name", table)
  return child.end
}

/** Each sampled transaction in a span above its statements, `BEGIN` and `COMMIT` included, unlike effect/sql's. */
export const withTransactionSpans = <C extends SqlClient.SqlClient>(client: C, system: string): C => {
  const withTransaction = client.withTransaction
  const inTransactionSpan = inSampledSpan("sql.transaction", { "db.system.name": system, "db.system": system })
  return Object.assign(client, {
    withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => inTransactionSpan(withTransaction(effect))
  })
}
