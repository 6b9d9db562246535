import { Effect, type Exit, Fiber } from "effect"
import type { SqlClient } from "effect/sql"
import { statementSummary } from "../Observability/Metrics.js"
import type { RequestTrace } from "../Observability/RequestTrace.js"
import { CurrentRequest } from "./CurrentRequest.js"

/** The trace of the request `fiber` serves, when that request is sampled. */
const traceOf = (fiber: Fiber.Fiber<unknown, unknown> | undefined): RequestTrace | undefined =>
  fiber?.getRef(CurrentRequest)?.trace

/** `effect` in a span of its request's trace when that trace is sampled, and as it is otherwise. */
export const inRequestSpan =
  (name: string, attributes: Readonly<Record<string, unknown>>) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.withFiber((fiber) => {
      const trace = traceOf(fiber)
      return trace === undefined ? effect : trace.around(effect, name, attributes)
    })

/**
 * A statement's span, started now when the running fiber serves a sampled request: named by what
 * it does (`SELECT pets`), with the database semantic conventions' attributes. Answers how to end
 * it, or undefined. Called as the statement starts, outside any effect: SQLite's run at once.
 */
export const startStatementSpan = (
  system: string,
  sql: string
): ((exit: Exit.Exit<unknown, unknown>) => void) | undefined => {
  const trace = traceOf(Fiber.getCurrent())
  if (trace === undefined) return undefined
  const { name, operation, table } = statementSummary(sql)
  const open = trace.child(name, "client")
  const { span } = open
  span.attribute("db.system.name", system)
  span.attribute("db.system", system)
  span.attribute("db.query.text", sql)
  span.attribute("db.operation.name", operation)
  if (table !== undefined) span.attribute("db.collection.name", table)
  return (exit) => trace.end(open, exit)
}

/**
 * `client` with its transactions in a `sql.transaction` span of a sampled request's trace, as
 * effect/sql names its own (which Effect's tracing, off, no longer makes): the transaction's
 * statements, its `BEGIN` and `COMMIT` included, are the span's children.
 */
export const withTransactionSpans = <C extends SqlClient.SqlClient>(client: C, system: string): C => {
  const withTransaction = client.withTransaction
  const inTransactionSpan = inRequestSpan("sql.transaction", { "db.system.name": system, "db.system": system })
  return Object.assign(client, {
    withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => inTransactionSpan(withTransaction(effect))
  })
}
