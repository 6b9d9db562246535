import { Clock, Context, type Effect, type Exit, Fiber, Option, Tracer } from "effect"
import type { SqlClient } from "effect/sql"
import { inSampledSpan } from "../Observability/Tracing.js"
import { statementSummary } from "./StatementSummary.js"

/**
 * A statement's span, started now under the running fiber's span when it is traced (a sampled
 * request), named by what it does (`SELECT pets`), with the database conventions' attributes; or
 * undefined. Called as the statement starts, so that a transaction's `BEGIN` and `COMMIT`, which
 * effect/sql runs without a span, have one too. Answers how to end it.
 */
export const startStatementSpan = (
  system: string,
  sql: string
): ((exit: Exit.Exit<unknown, unknown>) => void) | undefined => {
  const fiber = Fiber.getCurrent()
  const parent = fiber?.cache.span
  if (fiber === undefined || parent === undefined || !fiber.cache.tracerEnabled) return undefined
  const clock = fiber.getRef(Clock.Clock)
  const { name, operation, table } = statementSummary(sql)
  const span = fiber.getRef(Tracer.Tracer).span({
    name,
    parent: Option.some(parent),
    annotations: Context.empty(),
    links: [],
    startTime: clock.currentTimeNanosUnsafe(),
    kind: "client",
    root: false,
    sampled: parent.sampled
  })
  span.attribute("db.system.name", system)
  span.attribute("db.system", system)
  span.attribute("db.query.text", sql)
  span.attribute("db.operation.name", operation)
  if (table !== undefined) span.attribute("db.collection.name", table)
  return (exit) => span.end(clock.currentTimeNanosUnsafe(), exit)
}

/**
 * `client` with each transaction of a sampled request in a `sql.transaction` span above its
 * statements, its `BEGIN` and `COMMIT` included, which effect/sql's own span leaves out.
 */
export const withTransactionSpans = <C extends SqlClient.SqlClient>(client: C, system: string): C => {
  const withTransaction = client.withTransaction
  const inTransactionSpan = inSampledSpan("sql.transaction", { "db.system.name": system, "db.system": system })
  return Object.assign(client, {
    withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => inTransactionSpan(withTransaction(effect))
  })
}
