import { PgClient, type PgConnection, PgPool } from "@effect/sql-pg"
import { Duration, Effect, Fiber, Layer, Option, Predicate, Redacted, Schedule, type Scope } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql"
import type { Connection } from "effect/sql/SqlConnection"
import { ConnectionError, SqlError, UnknownError } from "effect/sql/SqlError"
import { AppConfig } from "../Config/AppConfig.js"
import { gaugeReadAtScrape } from "../Observability/Metrics.js"
import { ObservabilityConfig } from "../Observability/ObservabilityConfig.js"
import { databaseWords } from "./DatabaseErrors.js"
import { runMigrations } from "./Migrations.js"
import { statementDurations } from "./StatementTiming.js"

/** Any number the migrations' advisory lock can be known by; the same on every instance. */
const migrationLock = 7_346_270_001

/** Whether a `DATABASE_URL` names a PostgreSQL database rather than a SQLite file. */
export const isPostgresUrl = (databaseUrl: string): boolean => /^postgres(ql)?:\/\//i.test(databaseUrl)

/**
 * Why the database `DATABASE_URL` names could not be reached, naming its host and port (never the
 * user's password, which the URL carries) and the driver's reason: refused, unknown host, timeout.
 */
const cannotConnect = (databaseUrl: string, error: unknown): Error => {
  let url: URL
  try {
    url = new URL(databaseUrl)
  } catch {
    // Quoting the value could show its password.
    return new Error("DATABASE_URL is not a valid postgres:// URL (a password's reserved characters must be percent-encoded)")
  }
  const { hostname, port } = url
  const reason = error instanceof SqlError ? databaseWords(error) : error instanceof Error ? error.message : String(error)
  let password = url.password
  try {
    password = decodeURIComponent(password)
  } catch {
    // Left as written: the reason is searched for either spelling below.
  }
  return new Error(
    `Cannot connect to the PostgreSQL database at ${hostname || "localhost"}:${port || "5432"} that DATABASE_URL ` +
      `names: ${password === "" ? reason : reason.replaceAll(password, "***")}`
  )
}

/** A transaction left idle this long is ended by the server, freeing its locks and connection. */
const idleInTransactionMillis = 10_000

/** A pooled connection unused this long is closed. */
const idleTimeout = Duration.seconds(10)

const codeOf = (error: SqlError) => {
  const cause: unknown = error.reason.cause
  return Predicate.hasProperty(cause, "code") ? String(cause.code) : undefined
}

/** Refused, or up but not yet accepting sessions: worth another try while the database starts. */
const isRefused = (error: SqlError) => {
  const code = codeOf(error)
  return code === "ECONNREFUSED" || code === "57P03"
}

/** PostgreSQL answers a `COMMIT` of a transaction already failed with `ROLLBACK`: that is a failure. */
const commit = (connection: Connection): Effect.Effect<void, SqlError> =>
  Effect.flatMap(connection.executeRaw("COMMIT", []), (result) =>
    (result as PgConnection.Result).command === "ROLLBACK"
      ? Effect.fail(
        new SqlError({
          reason: new UnknownError({
            cause: new Error("COMMIT rolled back an aborted transaction"),
            message: "COMMIT rolled back an aborted transaction",
            operation: "commit"
          })
        })
      )
      : Effect.void)

/** A session's failure that leaves it unusable: lost, or ended by the server (a `FATAL` error). */
const isLost = (error: SqlError) => {
  const cause: unknown = error.reason.cause
  return error.reason._tag === "ConnectionError" ||
    (Predicate.hasProperty(cause, "severity") && (cause.severity === "FATAL" || cause.severity === "PANIC"))
}

/**
 * A statement whose caller can leave it: when interrupted (a request's deadline), and when the
 * server has not answered within `bound` (the statement timeout and half a second: only a server
 * that does not answer at all, stopped or its host hung, lets a statement run that long).
 * Interrupted, `@effect/sql-pg` drains the statement and has the server cancel it, which on such a
 * server takes its 5 s give-up, and a transaction's `BEGIN` cannot be interrupted at all. Run
 * apart, the statement is interrupted in the background while the caller goes on, and `onLeft`
 * discards its session, which would otherwise make the next caller wait for it.
 *
 * The bound is a plain timer, as a driver's query timeout is, not Effect's clock: measured in
 * process on Effect 4.1, the fiber and this timer cost 5.8 µs of CPU per statement, the fiber with
 * `Effect.timeoutOrElse` 13 µs, against about 75 µs for a one-row read by id.
 */
const leavable = <A>(
  statement: Effect.Effect<A, SqlError>,
  boundMillis: number,
  onLeft: Effect.Effect<void>
): Effect.Effect<A, SqlError> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(Effect.forkDetach(restore(statement)), (fiber) => {
      const leave = Effect.andThen(onLeft, Effect.asVoid(Effect.forkDetach(Fiber.interrupt(fiber))))
      const answer = Effect.callback<A, SqlError>((resume) => {
        const stopWatching = fiber.addObserver((exit) => {
          clearTimeout(timer)
          resume(exit)
        })
        const timer = setTimeout(() => {
          stopWatching()
          resume(Effect.andThen(leave, Effect.fail(noAnswer(boundMillis))))
        }, boundMillis)
        return Effect.sync(() => {
          clearTimeout(timer)
          stopWatching()
        })
      })
      return Effect.onInterrupt(restore(answer), () => leave)
    }))

const noAnswer = (boundMillis: number) => {
  const message = `PostgreSQL did not answer within ${Duration.format(Duration.millis(boundMillis))}`
  return new SqlError({ reason: new ConnectionError({ cause: new Error(message), message, operation: "execute" }) })
}

/**
 * A pooled session as `effect/sql` runs statements on it, each statement's duration given to
 * `durationOf` when set. `lost` learns of a failure that ended the session; `onLeft` runs when a
 * caller leaves a statement running.
 */
const connectionOf = (
  session: PgConnection.PgConnection,
  options: {
    readonly durationOf: ((sql: string) => (seconds: number) => void) | undefined
    readonly boundMillis: number
    readonly onLeft: Effect.Effect<void>
    readonly lost?: () => void
  }
): Connection => {
  const { boundMillis, durationOf, lost, onLeft } = options
  const run = <A>(sql: string, statement: Effect.Effect<A, SqlError>): Effect.Effect<A, SqlError> => {
    const watched = lost === undefined
      ? statement
      : Effect.tapError(statement, (error) => Effect.sync(() => isLost(error) && lost()))
    const timed = durationOf === undefined ? watched : Effect.suspend(() => {
      const start = performance.now()
      return Effect.onExit(watched, () => Effect.sync(() => durationOf(sql)((performance.now() - start) / 1000)))
    })
    return leavable(timed, boundMillis, onLeft)
  }
  const rows = (sql: string, params: ReadonlyArray<unknown>, prepare: boolean) =>
    run(sql, Effect.map(session.query(sql, params, prepare), (result) => result.rows))
  return {
    execute: (sql, params, transformRows) =>
      transformRows === undefined ? rows(sql, params, true) : Effect.map(rows(sql, params, true), transformRows),
    executeRaw: (sql, params) => run(sql, session.query(sql, params)),
    executeValues: (sql, params) => run(sql, session.queryValues(sql, params)),
    executeValuesUnprepared: (sql, params) => run(sql, session.queryValues(sql, params, false)),
    executeUnprepared: (sql, params, transformRows) =>
      transformRows === undefined ? rows(sql, params, false) : Effect.map(rows(sql, params, false), transformRows),
    executeStream: (sql, params) => session.stream(sql, params)
  }
}

interface ClientOptions {
  readonly url: string
  readonly maxConnections: number
  readonly applicationName: string
  readonly connectTimeout: Duration.Duration
  readonly statementTimeout: Duration.Duration
  readonly startTimeout: Duration.Duration
  /** Time each statement and count the pool's connections in use (metrics are on). */
  readonly observed: boolean
}

/**
 * `effect/sql`'s client on `@effect/sql-pg`'s pool of sessions, as `PgClient.make` builds it (its
 * compiler, prepared statements, `COMMIT` checked) but with a hand on each checkout:
 * `PgClient` offers none, and the service times each statement
 * (`db_client_operation_duration_seconds`) and reports the pool's connections in use and idle
 * (`db_client_connections_usage`), which `PgPool` does not count. Every session carries the
 * statement and idle-in-transaction timeouts; the first connection is tried at start, retried
 * while the database refuses it (each retry logged) up to the start timeout.
 */
const makeClient = (options: ClientOptions): Effect.Effect<SqlClient.SqlClient, SqlError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const pool = yield* PgPool.make({
      url: Redacted.make(options.url),
      maxConnections: options.maxConnections,
      idleTimeout,
      connectTimeout: options.connectTimeout,
      applicationName: options.applicationName,
      startupParameters: {
        statement_timeout: String(Duration.toMillis(options.statementTimeout)),
        idle_in_transaction_session_timeout: String(idleInTransactionMillis)
      }
    })
    yield* pool.use((session) => session.query("SELECT 1")).pipe(
      Effect.retry({
        while: isRefused,
        schedule: Schedule.min([Schedule.exponential("200 millis"), Schedule.spaced("2 seconds")]).pipe(
          Schedule.upTo({ duration: options.startTimeout }),
          Schedule.tap(({ input }) =>
            Effect.logWarning("the database refuses connections; retrying").pipe(
              Effect.annotateLogs({ reason: databaseWords(input as SqlError) })
            )
          )
        )
      })
    )
    const durationOf = options.observed ? statementDurations("postgresql") : undefined
    const usage = options.observed ? yield* connectionsUsage : undefined
    const boundMillis = Duration.toMillis(options.statementTimeout) + 500
    const wrap = (session: PgConnection.PgConnection) =>
      connectionOf(session, { durationOf, boundMillis, onLeft: pool.invalidate(session) })
    // A transaction's session that was lost needs no `ROLLBACK` (the server ended the transaction
    // with it), and trying one would turn the transaction's failure into a defect. One whose
    // statement was left running is closed rather than rolled back: the `ROLLBACK` would wait
    // for that statement, and the server rolls back a transaction whose session ends.
    const lostTransactions = new WeakSet<Connection>()
    const wrapTransaction = (session: PgConnection.PgConnection) => {
      const abandon = () => lostTransactions.add(connection)
      const connection: Connection = connectionOf(session, { durationOf, boundMillis, onLeft: Effect.sync(abandon), lost: abandon })
      return connection
    }
    const checkout = (
      take: Effect.Effect<PgConnection.PgConnection, SqlError, Scope.Scope>,
      wrapped: (session: PgConnection.PgConnection) => Connection
    ) =>
      usage === undefined ? Effect.map(take, wrapped) : Effect.flatMap(take, (session) =>
        Effect.as(
          Effect.acquireRelease(Effect.sync(() => usage.take(session)), () => Effect.sync(() => usage.give(session))),
          wrapped(session)
        ))
    return yield* SqlClient.make({
      acquirer: checkout(pool.get, wrap),
      borrower: usage === undefined
        ? (f) => pool.use((session) => f(wrap(session)))
        : (f) => pool.use((session) => {
          usage.take(session)
          return Effect.ensuring(f(wrap(session)), Effect.sync(() => usage.give(session)))
        }),
      transactionAcquirer: checkout(pool.reserve, wrapTransaction),
      isTransaction: (connection) => !lostTransactions.has(connection),
      // PostgreSQL prepares transaction control like any other statement.
      prepareTransactionControls: true,
      commit,
      releaseSavepoint: (name) => `RELEASE SAVEPOINT ${name}`,
      compiler: PgClient.makeCompiler(),
      driver: "pg",
      spanAttributes: [["db.system.name", "postgresql"], ["db.system", "postgresql"]]
    })
  })

/**
 * The pool's connections in use and idle, read at each scrape. In use: checked out now. Idle: the
 * others given back within the pool's idle timeout, after which the pool closes them (a session
 * the pool retires sooner, its server gone, counts until then).
 */
const connectionsUsage = Effect.gen(function*() {
  const givenBack = new Map<PgConnection.PgConnection, number>()
  let used = 0
  const idle = () => {
    const since = performance.now() - Duration.toMillis(idleTimeout)
    for (const [session, at] of givenBack) if (at < since) givenBack.delete(session)
    return givenBack.size
  }
  const description = "PostgreSQL pool connections, by state: used (running a statement or a transaction) or idle"
  yield* gaugeReadAtScrape("db_client_connections_usage", description, { state: "used" }, () => used)
  yield* gaugeReadAtScrape("db_client_connections_usage", description, { state: "idle" }, idle)
  return {
    take: (session: PgConnection.PgConnection) => {
      used++
      givenBack.delete(session)
    },
    give: (session: PgConnection.PgConnection) => {
      used--
      givenBack.set(session, performance.now())
    }
  }
})

/**
 * Instances starting together queue on an advisory lock held by one session while the migrator
 * runs on the others, so the first migrates and the rest find nothing left to do; the lock goes
 * with its session if an instance dies meanwhile.
 */
const migrate = (sql: SqlClient.SqlClient, startTimeout: Duration.Duration) =>
  Effect.scoped(Effect.gen(function*() {
    const lockHolder = yield* sql.reserve
    const tryLock = Effect.map(
      lockHolder.execute(`SELECT pg_try_advisory_lock(${migrationLock}) AS locked`, [], undefined),
      (rows) => rows[0]?.locked === true
    )
    // Polled rather than waited for in one statement, which the statement timeout would cut;
    // said every 5 s while another instance holds it.
    const lock = (polls: number): Effect.Effect<void, SqlError> =>
      Effect.flatMap(tryLock, (locked) =>
        locked ? Effect.void : Effect.andThen(
          polls % 20 === 0 ? Effect.logInfo("waiting for another instance to finish the migrations") : Effect.void,
          Effect.delay(Effect.suspend(() => lock(polls + 1)), "250 millis")
        ))
    // Interruptible, so that its bound and a stop signal can end the wait.
    yield* Effect.acquireRelease(
      Effect.interruptible(lock(0).pipe(
        Effect.timeoutOrElse({
          duration: startTimeout,
          orElse: () =>
            Effect.fail(
              new Error(
                `Another instance held the migrations' lock for longer than ${Duration.format(startTimeout)} ` +
                  "(DATABASE_START_TIMEOUT_SECONDS); is a migration stuck?"
              )
            )
        })
      )),
      () => Effect.ignore(lockHolder.execute(`SELECT pg_advisory_unlock(${migrationLock})`, [], undefined))
    )
    yield* Effect.provideService(runMigrations, SqlClient.SqlClient, sql)
  }))

/**
 * The PostgreSQL database a `postgres://` `DATABASE_URL` names, as the `SqlClient` every store
 * runs on, through a pool of up to 20 sessions, migrated before anything is served. A database
 * that cannot be reached stops the start, naming its host and port.
 */
export const PostgresConnection: Layer.Layer<SqlClient.SqlClient, Error, AppConfig> = Layer.effect(
  SqlClient.SqlClient,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const observability = yield* Effect.serviceOption(ObservabilityConfig)
    const sql = yield* makeClient({
      url: config.databaseUrl,
      maxConnections: 20,
      applicationName: "petstore",
      connectTimeout: config.databaseConnectTimeout,
      statementTimeout: config.databaseStatementTimeout,
      startTimeout: config.databaseStartTimeout,
      observed: Option.exists(observability, ({ metrics }) => Option.isSome(metrics))
    }).pipe(Effect.mapError((error) => cannotConnect(config.databaseUrl, error)))
    yield* migrate(sql, config.databaseStartTimeout)
    return sql
  })
).pipe(Layer.provide(Reactivity.layer))
