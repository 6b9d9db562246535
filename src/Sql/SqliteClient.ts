/**
 * A `SqlClient` on a SQLite file through `bun:sqlite`, built with `effect/sql`'s own constructor:
 * the stand-in for `@effect/sql-sqlite-bun`, whose releases do not load on effect 4.1.0, shaped
 * like its source (effect-smol `packages/sql/sqlite-bun/src/SqliteClient.ts`). Beside what that
 * client does, it keeps each statement text prepared, waits for another process's lock in Effect
 * rather than inside SQLite, and lends its one connection to statements outside a transaction
 * until the transaction has begun.
 */
import { Database, type Statement as Prepared } from "bun:sqlite"
import {
  Context,
  Duration,
  Effect,
  Exit,
  identity,
  Latch,
  Layer,
  Schedule,
  type Scope,
  Semaphore,
  Stream
} from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as Client from "effect/sql/SqlClient"
import type { Connection } from "effect/sql/SqlConnection"
import { classifySqliteError, ConnectionError, SqlError } from "effect/sql/SqlError"
import * as Statement from "effect/sql/Statement"

export const TypeId: TypeId = "~petstore/SqliteClient"

export type TypeId = "~petstore/SqliteClient"

export interface SqliteClient extends Client.SqlClient {
  readonly [TypeId]: TypeId
  readonly config: SqliteClientConfig
  /**
   * A statement text run with its parameters on the connection itself, its rows as SQLite gives
   * them passed to `transform`: what `Effect.map(unsafe(sql, params), transform)` answers, without
   * effect/sql's statement around the call (compiling the text again, a span even when tracing is
   * off, the connection's acquisition), with the same lock waits, timing and failures. For the
   * statements most requests make; inside a transaction it is the library's statement.
   */
  readonly executeDirect: <A>(
    sql: string,
    params: ReadonlyArray<unknown>,
    transform: (rows: ReadonlyArray<Record<string, unknown>>) => A
  ) => Effect.Effect<A, SqlError>
}

export const SqliteClient = Context.Service<SqliteClient>("petstore/SqliteClient")

/** Whether a `SqlClient` is this one: a store given only the `SqlClient` may use what it adds. */
export const isSqliteClient = (client: Client.SqlClient): client is SqliteClient => TypeId in client

export interface SqliteClientConfig {
  readonly filename: string
  readonly readonly?: boolean | undefined
  readonly create?: boolean | undefined
  readonly readwrite?: boolean | undefined
  readonly disableWAL?: boolean | undefined
  readonly spanAttributes?: Record<string, unknown> | undefined
  /** How a transaction begins (`BEGIN IMMEDIATE` takes the write lock at once); `BEGIN` by default. */
  readonly beginTransaction?: string | undefined
  /**
   * How long a statement may wait, in all, for a lock another connection holds: one answered
   * `SQLITE_BUSY` is tried again after 1, 2, 4 … 32 ms until this has passed. SQLite's own busy
   * timeout would wait inside its synchronous call, stopping the event loop. None by default.
   */
  readonly lockWait?: Duration.Input | undefined
  /** Why the database can no longer be used, if it cannot: every statement then fails with it as a `ConnectionError`. */
  readonly unusable?: (() => string | undefined) | undefined
  /** Called once per statement text; what it returns is given each run's duration in seconds. */
  readonly timer?: ((sql: string) => ((seconds: number) => void) | undefined) | undefined
  /** Called with each statement's failure: once, after its lock waits, not for each busy attempt. */
  readonly onFailure?: ((error: SqlError) => void) | undefined
  /** Called as each statement starts, from the fiber running it; what it returns is given its outcome, after any waits. */
  readonly onRun?: ((sql: string) => ((exit: Exit.Exit<unknown, SqlError>) => void) | undefined) | undefined
}

/** Statement texts kept prepared at most: the service has a few dozen; others are prepared per run. */
const maxPrepared = 500

interface Kept {
  readonly statement: Prepared
  readonly record: ((seconds: number) => void) | undefined
  readonly kept: boolean
}

const wordsOf = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

/** SQLite's failure classified by its code, its own words in the message the log shows. */
const sqliteError = (cause: unknown, operation: string) =>
  new SqlError({
    reason: classifySqliteError(cause, { message: `Failed to ${operation} statement: ${wordsOf(cause)}`, operation })
  })

const isBusy = (error: SqlError) => error.reason._tag === "LockTimeoutError"

/**
 * Opens `options.filename` and makes the client on its one connection. A failure to open is a
 * `SqlError` with SQLite's words. Rows are read to their end (`all`), also for a write's one
 * `RETURNING` row: SQLite checkpoints the WAL only after a statement that finished.
 */
export const make = (
  options: SqliteClientConfig
): Effect.Effect<SqliteClient, SqlError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const prepared = new Map<string, Kept>()
    const db = yield* Effect.acquireRelease(
      Effect.try({
        try: () =>
          new Database(options.filename, {
            readonly: options.readonly,
            readwrite: options.readwrite ?? options.readonly !== true,
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
    const prepare = (sql: string): Kept => {
      let kept = prepared.get(sql)
      if (kept === undefined) {
        const isKept = prepared.size < maxPrepared
        kept = { statement: db.prepare(sql), record: options.timer?.(sql), kept: isKept }
        if (isKept) prepared.set(sql, kept)
      }
      return kept
    }
    const { onFailure, onRun, unusable } = options

    /** One synchronous run of a statement: its rows, or its failure. */
    const attempt = (sql: string, params: ReadonlyArray<unknown>, values: boolean): ReadonlyArray<any> | SqlError => {
      const reason = unusable?.()
      if (reason !== undefined) {
        return new SqlError({
          reason: new ConnectionError({ cause: new Error(reason), message: reason, operation: "execute" })
        })
      }
      let kept: Kept
      try {
        kept = prepare(sql)
      } catch (cause) {
        return sqliteError(cause, "prepare")
      }
      const start = kept.record === undefined ? 0 : performance.now()
      try {
        const bindings = params as Array<any>
        return values ? kept.statement.values(...bindings) : kept.statement.all(...bindings)
      } catch (cause) {
        return sqliteError(cause, "execute")
      } finally {
        kept.record?.((performance.now() - start) / 1000)
        if (!kept.kept) kept.statement.finalize()
      }
    }

    const transactions = yield* Semaphore.make(1)
    // Closed from a transaction's `BEGIN` to its end: statements outside it wait meanwhile.
    const free = yield* Latch.make(true)
    let begun = false

    const lockWait = options.lockWait === undefined ? Duration.zero : Duration.fromInputUnsafe(options.lockWait)
    const waitForLock = Duration.isZero(lockWait)
      ? undefined
      : Schedule.min([Schedule.exponential("1 millis"), Schedule.spaced("32 millis")]).pipe(
        Schedule.upTo({ duration: lockWait })
      )

    /**
     * A statement run now, its rows passed to `transform`: outside a transaction that has begun it
     * first waits for its end; with `waitIfBusy` false, a lock another connection holds fails it.
     */
    const runUnobserved = <A>(
      sql: string,
      params: ReadonlyArray<unknown>,
      values: boolean,
      outside: boolean,
      transform: (rows: ReadonlyArray<any>) => A,
      waitIfBusy = true
    ): Effect.Effect<A, SqlError> => {
      if (outside && begun) {
        return Effect.andThen(
          free.await,
          Effect.suspend(() => runUnobserved(sql, params, values, outside, transform, waitIfBusy))
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
      // A run with `waitIfBusy` false is an attempt of the retry below, which reports the failure once.
      if (!waitIfBusy) return Effect.fail(result)
      if (waitForLock === undefined || !isBusy(result)) {
        onFailure?.(result)
        return Effect.fail(result)
      }
      const waited = Effect.retry(Effect.suspend(() => runUnobserved(sql, params, values, outside, transform, false)), {
        schedule: waitForLock,
        while: isBusy
      })
      return onFailure === undefined ? waited : Effect.tapError(waited, (error) => Effect.sync(() => onFailure(error)))
    }
    /** `runUnobserved`, given to `onRun` as a whole: its waits for a transaction's end and for a lock included. */
    const runNow = <A>(
      sql: string,
      params: ReadonlyArray<unknown>,
      values: boolean,
      outside: boolean,
      transform: (rows: ReadonlyArray<any>) => A
    ): Effect.Effect<A, SqlError> => {
      const ran = onRun?.(sql)
      const running = runUnobserved(sql, params, values, outside, transform)
      return ran === undefined ? running : Effect.onExit(running, (exit) => Effect.sync(() => ran(exit)))
    }
    /** `runNow` when the effect runs. */
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

    // A transaction holds the connection from its `BEGIN` to its end; transactions queue here.
    const transactionAcquirer = Effect.uninterruptibleMask((restore) =>
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
    )

    if (options.disableWAL !== true) {
      yield* outsideConnection.executeUnprepared("PRAGMA journal_mode = WAL", [], undefined)
    }

    const spanAttributes: ReadonlyArray<readonly [string, unknown]> = [
      ...(options.spanAttributes === undefined ? [] : Object.entries(options.spanAttributes)),
      ["db.system.name", "sqlite"]
    ]
    const client = yield* Client.make({
      acquirer: Effect.succeed(outsideConnection),
      borrower: (f) => f(outsideConnection),
      transactionAcquirer,
      beginTransaction: options.beginTransaction,
      isTransaction: () => db.inTransaction,
      // A failed COMMIT can leave SQLite's transaction open (a deferred foreign key).
      onCommitFailure: (conn) =>
        db.inTransaction ? Effect.asVoid(conn.executeUnprepared("ROLLBACK", [], undefined)) : Effect.void,
      releaseSavepoint: (name) => `RELEASE SAVEPOINT ${name}`,
      compiler: Statement.makeCompilerSqlite(),
      driver: "sqlite-bun",
      spanAttributes
    })
    const executeDirect = <A>(
      sql: string,
      params: ReadonlyArray<unknown>,
      transform: (rows: ReadonlyArray<Record<string, unknown>>) => A
    ): Effect.Effect<A, SqlError> =>
      Effect.withFiber((fiber) => {
        if (Context.getOrUndefined(fiber.context, client.transactionService) !== undefined) {
          return Effect.map(client.unsafe<Record<string, unknown>>(sql, params), transform)
        }
        return runNow(sql, params, false, true, transform)
      })
    return Object.assign(client, { [TypeId]: TypeId, config: options, executeDirect }) as SqliteClient
  })

/** The client as both `SqliteClient` and `SqlClient`. */
export const layer = (config: SqliteClientConfig): Layer.Layer<SqliteClient | Client.SqlClient, SqlError> =>
  Layer.effectContext(
    Effect.map(make(config), (client) => Context.make(SqliteClient, client).pipe(Context.add(Client.SqlClient, client)))
  ).pipe(Layer.provide(Reactivity.layer))
