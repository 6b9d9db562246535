/** The stand-in for `@effect/sql-sqlite-bun`, which does not load on effect 4.1.0 (docs/architecture.md). */
import { Database, type Statement as Prepared } from "bun:sqlite"
import type { Exit, Scope } from "effect"
import { Duration, Effect, identity, Latch, Layer, Schedule, Semaphore, Stream } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as Client from "effect/sql/SqlClient"
import type { Connection } from "effect/sql/SqlConnection"
import { classifySqliteError, SqlError } from "effect/sql/SqlError"
import * as Statement from "effect/sql/Statement"
import { connectionError } from "./DatabaseErrors.js"
import type { Run } from "./DirectStatements.js"

export interface SqliteClientConfig {
  readonly filename: string
  readonly readonly?: boolean | undefined
  readonly create?: boolean | undefined
  readonly disableWAL?: boolean | undefined
  /** How a transaction begins (`BEGIN IMMEDIATE` takes the write lock at once); `BEGIN` by default. */
  readonly beginTransaction?: string | undefined
  /** How long a statement answered `SQLITE_BUSY` is tried again (1, 2, 4 … 32 ms apart); none by default. */
  readonly lockWait?: Duration.Input | undefined
  /** Why the database can no longer be used, if so: every statement then fails with it as a `ConnectionError`. */
  readonly unusable?: (() => string | undefined) | undefined
  /** Called once per statement text; what it returns is given each run's duration in seconds. */
  readonly timer?: ((sql: string) => ((seconds: number) => void) | undefined) | undefined
  /** Called with each statement's failure: once, after its lock waits. */
  readonly onFailure?: ((error: SqlError) => void) | undefined
  /** Called as each statement starts, on its fiber; what it returns is given its outcome, after any waits. */
  readonly onRun?: ((sql: string) => ((exit: Exit.Exit<unknown, SqlError>) => void) | undefined) | undefined
}

/** Statement texts kept prepared at most: the service has a few dozen; others are prepared per run. */
const maxPrepared = 500

type Kept = Readonly<{ statement: Prepared; record: ((seconds: number) => void) | undefined; kept: boolean }>

/** SQLite's failure classified by its code, its own words in the message a log shows. */
const sqliteError = (cause: unknown, operation: string) => {
  const message = `Failed to ${operation} statement: ${cause instanceof Error ? cause.message : String(cause)}`
  return new SqlError({ reason: classifySqliteError(cause, { message, operation }) })
}

const isBusy = (error: SqlError) => error.reason._tag === "LockTimeoutError"

/** One connection to `options.filename`; rows read to their end: SQLite checkpoints only after a finished statement. */
export const make = (
  options: SqliteClientConfig
): Effect.Effect<Client.SqlClient & { readonly runDirect: Run }, SqlError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const prepared = new Map<string, Kept>()
    const db = yield* Effect.acquireRelease(
      Effect.try({
        try: () =>
          new Database(options.filename, {
            readonly: options.readonly,
            readwrite: options.readonly !== true,
            create: options.create ?? options.readonly !== true
          }),
        catch: (cause) => sqliteError(cause, "open")
      }),
      (db) =>
        Effect.sync(() => {
          for (const { statement } of prepared.values()) statement.finalize()
          prepared.clear()
          db.close()
        })
    )
    const { onFailure, onRun, unusable } = options

    const attempt = (sql: string, params: ReadonlyArray<unknown>, values: boolean): ReadonlyArray<any> | SqlError => {
      const reason = unusable?.()
      if (reason !== undefined) return connectionError(reason, "execute")
      let kept = prepared.get(sql)
      try {
        if (kept === undefined) {
          kept = { statement: db.prepare(sql), record: options.timer?.(sql), kept: prepared.size < maxPrepared }
          if (kept.kept) prepared.set(sql, kept)
        }
      } catch (cause) {
        return sqliteError(cause, "prepare")
      }
      const { record, statement } = kept
      const start = record === undefined ? 0 : performance.now()
      try {
        const bindings = params as Array<any>
        return values ? statement.values(...bindings) : statement.all(...bindings)
      } catch (cause) {
        return sqliteError(cause, "execute")
      } finally {
        record?.((performance.now() - start) / 1000)
        if (!kept.kept) statement.finalize()
      }
    }

    const transactions = yield* Semaphore.make(1)
    // Closed from a transaction's `BEGIN` to its end: statements outside it wait meanwhile.
    const free = yield* Latch.make(true)
    let begun = false

    const lockWait = Duration.fromInputUnsafe(options.lockWait ?? Duration.zero)
    const waitForLock = Duration.isZero(lockWait)
      ? undefined
      : Schedule.min([Schedule.exponential("1 millis"), Schedule.spaced("32 millis")]).pipe(
        Schedule.upTo({ duration: lockWait })
      )

    /** Outside a transaction that has begun, first waits for its end; `retrying`: a try of the lock's wait. */
    const runUnobserved = <A>(
      sql: string,
      params: ReadonlyArray<unknown>,
      values: boolean,
      outside: boolean,
      transform: (rows: ReadonlyArray<any>) => A,
      retrying = false
    ): Effect.Effect<A, SqlError> => {
      if (outside && begun) {
        return Effect.andThen(
          free.await,
          Effect.suspend(() => runUnobserved(sql, params, values, outside, transform, retrying))
        )
      }
      const result = attempt(sql, params, values)
      if (!(result instanceof SqlError)) {
        if (!outside && !begun && db.inTransaction) {
          begun = true
          free.closeUnsafe()
        }
        return Effect.succeed(transform(result))
      }
      if (retrying) return Effect.fail(result)
      const failed = waitForLock === undefined || !isBusy(result)
        ? Effect.fail(result)
        : Effect.retry(Effect.suspend(() => runUnobserved(sql, params, values, outside, transform, true)), {
          schedule: waitForLock,
          while: isBusy
        })
      return onFailure === undefined ? failed : Effect.tapError(failed, (error) => Effect.sync(() => onFailure(error)))
    }
    /** `runUnobserved`, given to `onRun` as a whole, its waits included. */
    const runNow: typeof runUnobserved = (sql, params, values, outside, transform) => {
      const ran = onRun?.(sql)
      const running = runUnobserved(sql, params, values, outside, transform)
      return ran === undefined ? running : Effect.onExit(running, (exit) => Effect.sync(() => ran(exit)))
    }
    const run: typeof runNow = (...args) => Effect.suspend(() => runNow(...args))

    const connection = (outside: boolean): Connection => ({
      execute: (sql, params, transformRows) => run(sql, params, false, outside, transformRows ?? identity),
      executeRaw: (sql, params) => run(sql, params, false, outside, identity),
      executeValues: (sql, params) => run(sql, params, true, outside, identity),
      executeValuesUnprepared: (sql, params) => run(sql, params, true, outside, identity),
      executeUnprepared: (sql, params, transformRows) => run(sql, params, false, outside, transformRows ?? identity),
      executeStream: () => Stream.die("executeStream not implemented")
    })
    const outsideConnection = connection(true)
    const transactionConnection = connection(false)

    if (options.disableWAL !== true) {
      yield* outsideConnection.executeUnprepared("PRAGMA journal_mode = WAL", [], undefined)
    }
    const client = yield* Client.make({
      acquirer: Effect.succeed(outsideConnection),
      borrower: (f) => f(outsideConnection),
      // A transaction holds the connection from its `BEGIN` to its end; transactions queue here.
      transactionAcquirer: Effect.uninterruptibleMask((restore) =>
        Effect.andThen(
          restore(transactions.take(1)),
          Effect.as(
            Effect.addFinalizer(() =>
              Effect.suspend(() => {
                begun = false
                free.openUnsafe()
                return transactions.release(1)
              })
            ),
            transactionConnection
          )
        )
      ),
      beginTransaction: options.beginTransaction,
      isTransaction: () => db.inTransaction,
      // A failed COMMIT can leave SQLite's transaction open (a deferred foreign key).
      onCommitFailure: (conn) =>
        db.inTransaction ? Effect.asVoid(conn.executeUnprepared("ROLLBACK", [], undefined)) : Effect.void,
      releaseSavepoint: (name) => `RELEASE SAVEPOINT ${name}`,
      compiler: Statement.makeCompilerSqlite(),
      driver: "sqlite-bun",
      spanAttributes: [["db.system.name", "sqlite"]]
    })
    const runDirect: Run = (sql, params, f) => runNow(sql, params, false, true, f)
    return Object.assign(client, { runDirect })
  })

export const layer = (config: SqliteClientConfig): Layer.Layer<Client.SqlClient, SqlError> =>
  Layer.effect(Client.SqlClient, make(config)).pipe(Layer.provide(Reactivity.layer))
