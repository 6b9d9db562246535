import { SqlClient, Statement } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Effectable, FiberRef, Option, Tracer } from "effect"
import { statementSummary } from "../Observability/Metrics.js"
import { withDatabaseReason } from "./DatabaseErrors.js"
import { statementDurations } from "./StatementTiming.js"

type Run = (sql: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<any>, SqlError>

/** A statement's span: named by its operation and table, with its text (`?` placeholders, never values). */
const spanOptions = (sql: string): Tracer.SpanOptions => {
  const { operation, table } = statementSummary(sql)
  const summary = table === undefined ? operation : `${operation} ${table}`
  return {
    kind: "client",
    captureStackTrace: false,
    attributes: {
      "db.system": "sqlite",
      "db.system.name": "sqlite",
      "db.operation.name": operation,
      ...(table === undefined ? {} : { "db.collection.name": table }),
      "db.query.summary": summary,
      "db.query.text": sql
    }
  }
}
const spansByText = new Map<string, readonly [name: string, options: Tracer.SpanOptions]>()
const spanOf = (sql: string) => {
  let span = spansByText.get(sql)
  if (span === undefined) {
    const options = spanOptions(sql)
    span = [String(options.attributes!["db.query.summary"]), options]
    if (spansByText.size < 1000) spansByText.set(sql, span)
  }
  return span
}

/**
 * A statement run straight on the connection: `@effect/sql` runs each statement in a span and a
 * scope of its own and finds its connection through the context, about 15 µs of CPU per
 * statement where a SQLite statement costs 4 (measured with an in-process loop). Inside a
 * transaction it runs on the transaction's connection. In a sampled trace it has a child span of
 * its own.
 */
class DirectStatement<A> extends Effectable.Class<ReadonlyArray<A>, SqlError> implements Statement.Statement<A> {
  constructor(readonly statement: Statement.Statement<A>, readonly runOutside: Run) {
    super()
  }
  get [Statement.FragmentId]() {
    return this.statement[Statement.FragmentId]
  }
  get segments() {
    return this.statement.segments
  }
  get raw() {
    return this.statement.raw
  }
  get withoutTransform() {
    return this.statement.withoutTransform
  }
  get stream() {
    return this.statement.stream
  }
  get values() {
    return this.statement.values
  }
  get unprepared() {
    return this.statement.unprepared
  }
  compile(withoutTransform?: boolean | undefined) {
    return this.statement.compile(withoutTransform)
  }
  commit(): Effect.Effect<ReadonlyArray<A>, SqlError> {
    return Effect.withFiberRuntime((fiber) => {
      const [sql, params] = this.statement.compile()
      const transaction = Context.getOption(fiber.currentContext, SqlClient.TransactionConnection)
      const run = transaction._tag === "Some"
        ? transaction.value[0].execute(sql, params, undefined)
        : this.runOutside(sql, params)
      if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return run
      const parent = Context.getOption(fiber.currentContext, Tracer.ParentSpan)
      // Outside a request, or in a trace not sampled: a span would only cost.
      if (Option.isNone(parent) || !parent.value.sampled) return run
      const [name, options] = spanOf(sql)
      return Effect.withSpan(run, name, options)
    })
  }
}

/**
 * A `SqlClient` on SQLite's one connection. A transaction holds the connection until it ends
 * (IMMEDIATE: its reads and writes hold the write lock together, across processes too); a
 * statement outside it waits meanwhile rather than run inside another fiber's transaction, and a
 * transaction begins once the statements already started outside it have ended. Every statement
 * is timed when `timed`, and a failure carries SQLite's own words.
 */
export const makeSqliteClient = (connection: Connection, timed: boolean) =>
  Effect.gen(function*() {
    const lock = yield* Effect.makeSemaphore(1)
    let inTransaction = false
    let running = 0
    const durationOf = statementDurations("sqlite")
    // One exit handler per statement for the count, the timing and the error's reason: each
    // handler costs about a microsecond.
    const observe = <A>(sql: string, run: Effect.Effect<A, SqlError>, counted: boolean): Effect.Effect<A, SqlError> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.suspend(() => {
          if (counted && inTransaction) {
            return restore(Effect.zipRight(lock.withPermits(1)(Effect.void), observe(sql, run, counted)))
          }
          if (counted) running++
          const start = timed ? performance.now() : 0
          const done = () => {
            if (counted) running--
            if (timed) durationOf(sql).unsafeUpdate((performance.now() - start) / 1000, [])
          }
          return Effect.matchCauseEffect(restore(run), {
            onFailure: (cause) => (done(), Effect.failCause(withDatabaseReason(cause))),
            onSuccess: (rows) => (done(), Effect.succeed(rows))
          })
        })
      )
    const through = (counted: boolean): Connection => ({
      execute: (sql, params, transformRows) => observe(sql, connection.execute(sql, params, transformRows), counted),
      executeRaw: (sql, params) => observe(sql, connection.executeRaw(sql, params), counted),
      executeValues: (sql, params) => observe(sql, connection.executeValues(sql, params), counted),
      executeUnprepared: (sql, params, transformRows) =>
        observe(sql, connection.executeUnprepared(sql, params, transformRows), counted),
      executeStream: (sql, params, transformRows) => connection.executeStream(sql, params, transformRows)
    })
    const statementsEnded: Effect.Effect<void> = Effect.suspend(() =>
      running === 0 ? Effect.void : Effect.zipRight(Effect.yieldNow(), statementsEnded)
    )
    const outside = through(true)
    const client = yield* SqlClient.make({
      acquirer: Effect.succeed(outside),
      transactionAcquirer: Effect.uninterruptibleMask((restore) =>
        Effect.zipRight(
          restore(lock.take(1)),
          Effect.addFinalizer(() => Effect.zipRight(Effect.sync(() => inTransaction = false), lock.release(1)))
        )
      ).pipe(
        Effect.tap(() => inTransaction = true),
        Effect.zipRight(statementsEnded),
        Effect.as(through(false))
      ),
      beginTransaction: "BEGIN IMMEDIATE",
      compiler: Statement.makeCompilerSqlite(),
      spanAttributes: [["db.system.name", "sqlite"], ["db.system", "sqlite"]]
    })
    const run: Run = (sql, params) => outside.execute(sql, params, undefined)
    // Rows are used as SQLite gives them: no transform is configured.
    const direct = Object.assign(
      function sql(strings: unknown, ...args: Array<unknown>): unknown {
        const made: unknown = Reflect.apply(client, undefined, [strings, ...args])
        return Effect.isEffect(made) ? new DirectStatement(made as Statement.Statement<unknown>, run) : made
      },
      client,
      { unsafe: (sql: string, params?: ReadonlyArray<unknown>) => new DirectStatement(client.unsafe(sql, params), run) }
    )
    // The library's helpers (`literal`, `in`, `withTransaction`, …) as they are; only the
    // template's statements differ, which its call signatures cannot say of a plain function.
    return Object.assign(direct, { safe: direct }) as unknown as SqlClient.SqlClient
  })
