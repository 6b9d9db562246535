import { Clock, Context, type Effect, type Exit, Fiber, Option, Tracer } from "effect"
import type { SqlClient } from "effect/sql"
import { inSampledSpan } from "../Observability/Tracing.js"
import { statementSummary } from "./StatementSummary.js"

/** A sampled statement's span, started as it starts so that `BEGIN` and `COMMIT` have one too; answers how to end it. */
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

/** Each sampled transaction in a span above its statements, `BEGIN` and `COMMIT` included, unlike effect/sql's. */
export const withTransactionSpans = <C extends SqlClient.SqlClient>(client: C, system: string): C => {
  const withTransaction = client.withTransaction
  const inTransactionSpan = inSampledSpan("sql.transaction", { "db.system.name": system, "db.system": system })
  return Object.assign(client, {
    withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => inTransactionSpan(withTransaction(effect))
  })
}
