import type { Database } from "bun:sqlite"
import { Exit, Fiber, Option, type Tracer } from "effect"
import { statementDurationOf, statementSummary } from "./Metrics.js"

const nowNanos = () => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6))

/**
 * A span for a statement run synchronously inside an effect, as a child of the running fiber's
 * span.
 */
const startSpan = (sql: string, attributes: Record<string, string>): Tracer.Span | undefined => {
  const fiber = Fiber.getCurrentFiber()
  if (Option.isNone(fiber)) return undefined
  const parent = fiber.value.currentSpan
  // Outside a request, or in a trace not sampled: a span would only cost.
  if (parent === undefined || !parent.sampled) return undefined
  const span = fiber.value.currentTracer.span(
    attributes["db.query.summary"]!,
    Option.some(parent),
    fiber.value.currentContext,
    [],
    nowNanos(),
    "client",
    { captureStackTrace: false }
  )
  for (const key in attributes) span.attribute(key, attributes[key])
  span.attribute("db.query.text", sql)
  return span
}

const methods = ["all", "get", "run", "values"] as const

/**
 * Times every statement prepared on `db` (`db_client_operation_duration_seconds`) and, with
 * tracing, runs each in a client span with `db.system` and its SQL text: prepared statements
 * carry `?` placeholders, never the values.
 */
export const observeStatements = (db: Database, options: { readonly tracing: boolean }): Database => {
  const prepare = db.query.bind(db)
  // `query` hands out the same cached statement for the same SQL: it is wrapped once.
  const observed = new WeakSet<object>()
  db.query = ((sql: string) => {
    const statement = prepare(sql) as unknown as Record<(typeof methods)[number], (...args: Array<any>) => any>
    if (observed.has(statement)) return statement
    observed.add(statement)
    const { operation, table } = statementSummary(sql)
    const duration = statementDurationOf("sqlite", operation, table ?? "")
    const attributes = {
      "db.system": "sqlite",
      "db.system.name": "sqlite",
      "db.operation.name": operation,
      ...(table === undefined ? {} : { "db.collection.name": table }),
      "db.query.summary": table === undefined ? operation : `${operation} ${table}`
    }
    for (const method of methods) {
      const run = statement[method].bind(statement)
      statement[method] = (...args: Array<any>) => {
        const span = options.tracing ? startSpan(sql, attributes) : undefined
        const start = performance.now()
        try {
          const result = run(...args)
          span?.end(nowNanos(), Exit.void)
          return result
        } catch (error) {
          span?.end(nowNanos(), Exit.die(error))
          throw error
        } finally {
          duration.unsafeUpdate((performance.now() - start) / 1000, [])
        }
      }
    }
    return statement
  }) as typeof db.query
  return db
}
