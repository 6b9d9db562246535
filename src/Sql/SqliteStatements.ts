import { SqlClient, Statement } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import { Cause, Duration, Effect, Predicate } from "effect"
import { withDatabaseReason } from "./DatabaseErrors.js"
import { makeDirectClient } from "./DirectStatements.js"
import { statementDurations } from "./StatementTiming.js"

/** A statement's failure: its error, or a defect when its rows were to be mapped (`rowsOrDie`). */
const failed = (error: SqlError, mapRows: unknown) => mapRows === undefined ? Effect.fail(error) : Effect.die(error)

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
      mapRows?: (rows: A) => unknown,
      waitedSince = 0,
      delay = 1
    ): Effect.Effect<A, SqlError> =>
      Effect.uninterruptibleMask((restore) => {
        const reason = unusable()
        if (reason !== undefined) {
          return failed(new SqlError({ message: reason, cause: { code: "SQLITE_CANTOPEN", message: reason } }), mapRows)
        }
        if (counted && inTransaction) {
          return restore(Effect.zipRight(connectionFree.await, observe(sql, run, counted, retryBusy, mapRows, waitedSince, delay)))
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
                  observe(sql, run, counted, true, mapRows, since, Math.min(delay * 2, 32))
                ))
              }
            }
            const reasoned = withDatabaseReason(cause)
            const error = Cause.failureOption(reasoned)
            return mapRows === undefined || error._tag === "None" ? Effect.failCause(reasoned) : Effect.die(error.value)
          },
          onSuccess: (rows) => {
            done()
            return Effect.succeed(mapRows === undefined ? rows : mapRows(rows) as A)
          }
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
    return makeDirectClient(client, "sqlite", {
      run: (sql, params) => outside.execute(sql, params, undefined),
      // The rows made into the caller's value in the statement's own last step.
      mapRowsOrDie: (sql, params, f) => observe(sql, connection.execute(sql, params, undefined), true, true, f) as Effect.Effect<any>
    })
  })
