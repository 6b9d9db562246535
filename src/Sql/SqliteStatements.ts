import { SqlClient, Statement } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import { Cause, Context, Duration, Effect, Effectable, Predicate } from "effect"
import { statementSummary } from "../Observability/Metrics.js"
import { inChildSpan } from "../Observability/Tracing.js"
import { type Compiled, makeCallSiteCompiler } from "./CallSites.js"
import { withDatabaseReason } from "./DatabaseErrors.js"
import { statementDurations } from "./StatementTiming.js"

type Run = (sql: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<any>, SqlError>

/** A statement's span: named by its operation and table, with its text (`?` placeholders, never values). */
const spanOf = (sql: string): readonly [name: string, attributes: Readonly<Record<string, unknown>>] => {
  const { operation, table } = statementSummary(sql)
  const summary = table === undefined ? operation : `${operation} ${table}`
  return [summary, {
    "db.system": "sqlite",
    "db.system.name": "sqlite",
    "db.operation.name": operation,
    ...(table === undefined ? {} : { "db.collection.name": table }),
    "db.query.summary": summary,
    "db.query.text": sql
  }]
}
// The statements are the service's own: a few dozen texts. Bounded all the same.
const spansByText = new Map<string, ReturnType<typeof spanOf>>()
const cachedSpanOf = (sql: string) => {
  let span = spansByText.get(sql)
  if (span === undefined) {
    span = spanOf(sql)
    if (spansByText.size < 1000) spansByText.set(sql, span)
  }
  return span
}

/** How the client's statements are made, compiled and run outside a transaction; one per client. */
interface StatementSource {
  readonly build: (strings: TemplateStringsArray, args: ReadonlyArray<unknown>) => Statement.Statement<unknown>
  readonly compile: (strings: TemplateStringsArray, args: ReadonlyArray<unknown>) => Compiled
  readonly runOutside: Run
}

/**
 * A statement run straight on the connection: `@effect/sql` runs each statement in a span and a
 * scope of its own and finds its connection through the context, about 15 µs of CPU per
 * statement where a SQLite statement costs 4 (measured with an in-process loop). Its text comes
 * from its call site (`CallSites.ts`); the library's own statement is built only when asked for
 * (`raw`, `stream`, …). Inside a transaction it runs on the transaction's connection. In a
 * sampled trace it has a child span of its own.
 */
class DirectStatement<A> extends Effectable.Class<ReadonlyArray<A>, SqlError> implements Statement.Statement<A> {
  constructor(
    private readonly source: StatementSource,
    private readonly strings: TemplateStringsArray | undefined,
    private readonly args: ReadonlyArray<unknown>,
    private built?: Statement.Statement<A>
  ) {
    super()
  }
  get statement(): Statement.Statement<A> {
    return this.built ??= this.source.build(this.strings!, this.args) as Statement.Statement<A>
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
      const [sql, params] = this.built === undefined
        ? this.source.compile(this.strings!, this.args)
        : this.built.compile()
      const transaction = Context.getOption(fiber.currentContext, SqlClient.TransactionConnection)
      const run = transaction._tag === "Some"
        ? transaction.value[0].execute(sql, params, undefined)
        : this.source.runOutside(sql, params)
      // Outside a request, or in a trace not sampled: a span would only cost.
      const parent = fiber.currentSpan
      if (parent?.sampled !== true) return run
      const [name, attributes] = cachedSpanOf(sql)
      return inChildSpan(fiber.currentTracer, parent, name, "client", attributes, run)
    })
  }
}

/** SQLite's answer when another connection holds the lock a statement needs. */
const isBusy = (error: SqlError): boolean => {
  const cause: unknown = error.cause
  const code = Predicate.hasProperty(cause, "code") ? String(cause.code) : ""
  return code.startsWith("SQLITE_BUSY") || (Predicate.hasProperty(cause, "message") && /database is locked/.test(String(cause.message)))
}

export interface SqliteClientOptions {
  /** Time every statement for the SQL histogram. */
  readonly timed: boolean
  /** How long a statement may wait, in all, for a lock another process holds. */
  readonly lockWait: Duration.Duration
  /** Why the database can no longer be used (its file deleted or replaced), if it cannot. */
  readonly unusable: () => string | undefined
}

/**
 * A `SqlClient` on SQLite's one connection. A transaction holds the connection from its `BEGIN
 * IMMEDIATE` to its end (its reads and writes hold the write lock together, across processes
 * too); a statement outside it waits meanwhile rather than run inside another fiber's
 * transaction, and a transaction begins once the statements already started outside it have
 * ended. Every statement is timed when `timed`, and a failure carries SQLite's own words.
 *
 * Another process holding the write lock (a backup, a `sqlite3` shell) is waited for here, in
 * Effect, not in SQLite's busy handler, which sleeps inside the synchronous call and so stops the
 * whole event loop: the connection's busy timeout is 0, and a statement answered `SQLITE_BUSY` is
 * tried again after 1, 2, 4 … 32 ms until `lockWait` has passed, then fails as busy (a 503). A
 * transaction waiting for its `BEGIN` leaves the connection to other statements between tries.
 */
export const makeSqliteClient = (connection: Connection, options: SqliteClientOptions) =>
  Effect.gen(function*() {
    const { timed, unusable } = options
    const lockWaitMillis = Duration.toMillis(options.lockWait)
    const transactions = yield* Effect.makeSemaphore(1)
    // Open while no transaction holds the connection; statements outside one wait on it.
    const connectionFree = yield* Effect.makeLatch(true)
    let inTransaction = false
    // Whether the transaction holding the connection got past its `BEGIN`.
    let begun = false
    let running = 0
    const durationOf = statementDurations("sqlite")
    const release = () => {
      inTransaction = false
      begun = false
      connectionFree.unsafeOpen()
    }
    // A statement is one synchronous call into SQLite, which nothing can stop halfway: it runs
    // uninterruptibly, so its exit handler (the count, the timing, the error's reason, a busy
    // database's retry) always runs, and only the waits around it (a transaction's end, another
    // process's lock) are interruptible, as the caller is. `uninterruptibleMask` calls its function
    // inside the region, so no `suspend` is needed: each step taken out of a statement saves about
    // half a microsecond (`bun scripts/bench/instructions.ts` counts them).
    const observe = <A>(
      sql: string,
      run: Effect.Effect<A, SqlError>,
      counted: boolean,
      retryBusy = true,
      waitedSince = 0,
      delay = 1
    ): Effect.Effect<A, SqlError> =>
      Effect.uninterruptibleMask((restore) => {
        const reason = unusable()
        if (reason !== undefined) {
          return Effect.fail(new SqlError({ message: reason, cause: { code: "SQLITE_CANTOPEN", message: reason } }))
        }
        if (counted && inTransaction) {
          return restore(Effect.zipRight(connectionFree.await, observe(sql, run, counted, retryBusy, waitedSince, delay)))
        }
        if (counted) running++
        const start = timed ? performance.now() : 0
        const done = () => {
          if (counted) running--
          if (timed) durationOf(sql).unsafeUpdate((performance.now() - start) / 1000, [])
        }
        return Effect.matchCauseEffect(run, {
          onFailure: (cause) => {
            done()
            const failure = Cause.failureOption(cause)
            if (retryBusy && failure._tag === "Some" && isBusy(failure.value)) {
              const since = waitedSince || performance.now()
              if (performance.now() + delay - since < lockWaitMillis) {
                return restore(Effect.zipRight(
                  Effect.sleep(delay),
                  observe(sql, run, counted, true, since, Math.min(delay * 2, 32))
                ))
              }
            }
            return Effect.failCause(withDatabaseReason(cause))
          },
          onSuccess: (rows) => (done(), Effect.succeed(rows))
        })
      })
    const statementsEnded: Effect.Effect<void> = Effect.suspend(() =>
      running === 0 ? Effect.void : Effect.zipRight(Effect.yieldNow(), statementsEnded)
    )
    const beginStatement = "BEGIN IMMEDIATE"
    const rollbackStatement = "ROLLBACK"
    // The transaction's `BEGIN`: the connection is taken for each try and given back if another
    // process holds the lock, so reads go on while the transaction waits.
    const begin = (waitedSince = 0, delay = 1): Effect.Effect<ReadonlyArray<any>, SqlError> =>
      Effect.suspend(() => {
        const since = waitedSince === 0 ? performance.now() : waitedSince
        inTransaction = true
        connectionFree.unsafeClose()
        return statementsEnded.pipe(
          Effect.zipRight(observe(beginStatement, connection.executeUnprepared(beginStatement, [], undefined), false, false)),
          Effect.tap(() => {
            begun = true
          }),
          Effect.catchIf(
            (error) => isBusy(error) && performance.now() + delay - since < lockWaitMillis,
            () => {
              release()
              return Effect.zipRight(Effect.sleep(delay), begin(since, Math.min(delay * 2, 32)))
            }
          )
        )
      })
    const through = (counted: boolean): Connection => ({
      execute: (sql, params, transformRows) => observe(sql, connection.execute(sql, params, transformRows), counted),
      executeRaw: (sql, params) => observe(sql, connection.executeRaw(sql, params), counted),
      executeValues: (sql, params) => observe(sql, connection.executeValues(sql, params), counted),
      executeUnprepared: (sql, params, transformRows) =>
        counted
          ? observe(sql, connection.executeUnprepared(sql, params, transformRows), counted)
          : sql === beginStatement
          ? begin()
          // `@effect/sql` rolls back a transaction whose `BEGIN` failed too; SQLite would answer
          // that no transaction is active, and that defect would take the place of the reason
          // (a lock held past the wait: a 503) in the caller's failure.
          : sql === rollbackStatement && !begun
          ? Effect.succeed([])
          : observe(sql, connection.executeUnprepared(sql, params, transformRows), counted),
      executeStream: (sql, params, transformRows) => connection.executeStream(sql, params, transformRows)
    })
    const outside = through(true)
    const client = yield* SqlClient.make({
      acquirer: Effect.succeed(outside),
      transactionAcquirer: Effect.uninterruptibleMask((restore) =>
        Effect.zipRight(
          restore(transactions.take(1)),
          Effect.addFinalizer(() => Effect.zipRight(Effect.sync(release), transactions.release(1)))
        )
      ).pipe(Effect.as(through(false))),
      beginTransaction: beginStatement,
      rollback: rollbackStatement,
      compiler: Statement.makeCompilerSqlite(),
      spanAttributes: [["db.system.name", "sqlite"], ["db.system", "sqlite"]]
    })
    const build = (strings: TemplateStringsArray, args: ReadonlyArray<unknown>) =>
      Reflect.apply(client, undefined, [strings, ...args]) as Statement.Statement<unknown>
    const source: StatementSource = {
      build,
      compile: makeCallSiteCompiler((strings, args) => build(strings, args).compile()),
      runOutside: (sql, params) => outside.execute(sql, params, undefined)
    }
    // Rows are used as SQLite gives them: no transform is configured.
    const direct = Object.assign(
      function sql(strings: unknown, ...args: Array<unknown>): unknown {
        // `sql("name")` is an identifier, not a statement.
        return Array.isArray(strings) && "raw" in strings
          ? new DirectStatement(source, strings as unknown as TemplateStringsArray, args)
          : Reflect.apply(client, undefined, [strings, ...args])
      },
      client,
      {
        unsafe: (sql: string, params?: ReadonlyArray<unknown>) =>
          new DirectStatement(source, undefined, [], client.unsafe(sql, params))
      }
    )
    // The library's helpers (`literal`, `in`, `withTransaction`, …) as they are; only the
    // template's statements differ, which its call signatures cannot say of a plain function.
    return Object.assign(direct, { safe: direct }) as unknown as SqlClient.SqlClient
  })
