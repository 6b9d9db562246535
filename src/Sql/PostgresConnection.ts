import { PgClient, type PgConnection, PgPool } from "@effect/sql-pg"
import { Duration, Effect, Exit, Fiber, Layer, Option, Predicate, Redacted, Schedule, Scope, Semaphore } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql"
import type { Connection } from "effect/sql/SqlConnection"
import { ConnectionError, isSqlError, SqlError, UnknownError } from "effect/sql/SqlError"
import { AppConfig } from "../Config/AppConfig.js"
import { readAtScrape } from "../Observability/Metrics.js"
import { ObservabilityConfig } from "../Observability/ObservabilityConfig.js"
import { databaseWords, isReadOnly } from "./DatabaseErrors.js"
import { runMigrations } from "./Migrations.js"
import { startStatementSpan, withTransactionSpans } from "./StatementSpans.js"
import { statementDurations, statementFailures } from "./StatementTiming.js"

/** Any number the migrations' advisory lock can be known by; the same on every instance. */
const migrationLock = 7_346_270_001

/** Where `DATABASE_URL` points, as host:port: never the user's password, which the URL carries. */
const addressOf = (databaseUrl: string): string | undefined => {
  try {
    const { hostname, port } = new URL(databaseUrl)
    return `${hostname || "localhost"}:${port || "5432"}`
  } catch {
    return undefined
  }
}

/** `reason`, without the URL's password in either spelling (the driver may quote the URL). */
const withoutPassword = (databaseUrl: string, reason: string): string => {
  let password: string
  try {
    password = new URL(databaseUrl).password
  } catch {
    return reason
  }
  if (password === "") return reason
  let decoded = password
  try {
    decoded = decodeURIComponent(password)
  } catch {
    // Left as written.
  }
  return reason.replaceAll(password, "***").replaceAll(decoded, "***")
}

const reasonOf = (error: unknown) =>
  error instanceof SqlError ? databaseWords(error) : error instanceof Error ? error.message : String(error)

/**
 * Why the service cannot start on the database `DATABASE_URL` names, in one line naming its host
 * and port and the reason: refused, unknown host, timeout, a standby, read-only.
 */
const cannotStart = (databaseUrl: string, doing: string, error: unknown): Error => {
  const address = addressOf(databaseUrl)
  // Quoting the value could show its password.
  if (address === undefined) {
    return new Error(
      "DATABASE_URL is not a valid postgres:// URL (a password's reserved characters must be percent-encoded)"
    )
  }
  return new Error(
    `Cannot ${doing} the PostgreSQL database at ${address} that DATABASE_URL names: ${
      withoutPassword(databaseUrl, reasonOf(error))
    }`
  )
}

/**
 * The service writes on every create and keeps its schema by migrating: a standby (in recovery)
 * or a database whose sessions are read-only (`default_transaction_read_only`) cannot serve it.
 * Found at start with one statement, named rather than left to fail the migrations.
 */
const writable = (sql: SqlClient.SqlClient) =>
  Effect.flatMap(
    sql<
      { standby: boolean; read_only: string }
    >`SELECT pg_is_in_recovery() AS standby, current_setting('transaction_read_only') AS read_only`,
    ([row]) =>
      row?.standby === true
        ? Effect.fail(
          new Error("it is a standby (in recovery), which takes no writes; point DATABASE_URL at the primary")
        )
        : row?.read_only === "on"
        ? Effect.fail(
          new Error("it is read-only (its sessions' default_transaction_read_only is on); make it writable")
        )
        : Effect.void
  )

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
 * The bound is a plain timer, as a driver's query timeout is: `Effect.timeoutOrElse` would race
 * another fiber for every statement.
 */
const leavable = <A>(
  statement: Effect.Effect<A, SqlError>,
  boundMillis: number,
  onLeft: Effect.Effect<void>,
  onNoAnswer: (error: SqlError) => Effect.Effect<void>
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
          const error = noAnswer(boundMillis)
          resume(Effect.andThen(Effect.andThen(leave, onNoAnswer(error)), Effect.fail(error)))
        }, boundMillis)
        return Effect.sync(() => {
          clearTimeout(timer)
          stopWatching()
        })
      })
      return Effect.onInterrupt(restore(answer), () => leave)
    })
  )

/**
 * Every session of the pool was lent for as long as opening one may take: a checkout gives up
 * then, as a connect does, rather than wait out the request's deadline behind statements that a
 * server that does not answer leaves running.
 */
const noSessionFree = (connectTimeout: Duration.Duration) => {
  const message = `No PostgreSQL connection came free within ${
    Duration.format(connectTimeout)
  } (DATABASE_CONNECT_TIMEOUT_SECONDS)`
  return new SqlError({ reason: new ConnectionError({ cause: new Error(message), message, operation: "connect" }) })
}

/**
 * While PostgreSQL is not answering, one checkout at a time tries it; the others are answered at
 * once. Each connect given up on stays in the server's listen queue, and a server coming back
 * starts a session for every one of them before it gets to the new ones: twenty at a time per
 * instance for the length of an outage kept every request failing for 5 s after a 10 s freeze.
 */
const notAnswering = () => {
  const message = "PostgreSQL is not answering; one connection at a time is tried until it does"
  return new SqlError({ reason: new ConnectionError({ cause: new Error(message), message, operation: "connect" }) })
}

const isConnectionFailure = (exit: Exit.Exit<unknown, unknown>) => {
  const error = Exit.findErrorOption(exit)
  return Option.isSome(error) && isSqlError(error.value) && error.value.reason._tag === "ConnectionError"
}

const noAnswer = (boundMillis: number) => {
  const message = `PostgreSQL did not answer within ${Duration.format(Duration.millis(boundMillis))}`
  return new SqlError({ reason: new ConnectionError({ cause: new Error(message), message, operation: "execute" }) })
}

/**
 * A failure after which a session is closed rather than given back: its statement timed out or
 * was cancelled (the server's `57014`; the session may still be busy with it), or it refused a
 * write as read-only (a session keeps the `default_transaction_read_only` it started with, so
 * only a new one sees the database writable again).
 */
const spoils = (error: SqlError) => error.reason._tag === "StatementTimeoutError" || isReadOnly(error)

/**
 * A pooled session as `effect/sql` runs statements on it, each statement's duration given to
 * `durationOf` and each failure, the server's silence included, to `failed`, when set, and a span
 * when `traced` and its request is sampled (`startStatementSpan`). `retire`
 * closes the session once its checkout ends, after a failure that `spoils` it and when a caller
 * leaves a statement running (`onLeft`, for a transaction's session what else it needs);
 * `noAnswer` runs when the server did not answer within `boundMillis`; `lost` learns of a failure
 * that ended the session.
 */
const connectionOf = (
  session: PgConnection.PgConnection,
  options: {
    readonly durationOf: ((sql: string) => (seconds: number) => void) | undefined
    readonly failed: ((error: SqlError) => void) | undefined
    readonly traced: boolean
    readonly boundMillis: number
    readonly retire: Effect.Effect<void>
    readonly onLeft: Effect.Effect<void>
    readonly noAnswer: Effect.Effect<void>
    readonly lost: (() => void) | undefined
  }
): Connection => {
  const { boundMillis, durationOf, failed, lost, noAnswer, onLeft, retire, traced } = options
  const left = Effect.andThen(retire, onLeft)
  const unanswered = failed === undefined
    ? () => noAnswer
    : (error: SqlError) => Effect.andThen(Effect.sync(() => failed(error)), noAnswer)
  const run = <A>(sql: string, statement: Effect.Effect<A, SqlError>): Effect.Effect<A, SqlError> => {
    const watched = Effect.tapError(statement, (error) => {
      failed?.(error)
      if (lost !== undefined && isLost(error)) lost()
      return spoils(error) ? retire : Effect.void
    })
    const timed = durationOf === undefined && !traced ? watched : Effect.suspend(() => {
      const start = performance.now()
      const ran = traced ? startStatementSpan("postgresql", sql) : undefined
      // Tracing on, metrics off, and the request not sampled: nothing to note when it ends.
      if (ran === undefined && durationOf === undefined) return watched
      return Effect.onExit(watched, (exit) =>
        Effect.sync(() => {
          durationOf?.(sql)((performance.now() - start) / 1000)
          ran?.(exit)
        }))
    })
    return leavable(timed, boundMillis, left, unanswered)
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
  /** How long a connection sits silent before TCP keepalive probes its server. */
  readonly keepAlive: Duration.Duration
  /** Time each statement and count the pool's connections in use (metrics are on). */
  readonly observed: boolean
  /** Give each statement of a sampled request a span (tracing is on). */
  readonly traced: boolean
}

/**
 * `effect/sql`'s client on `@effect/sql-pg`'s pool of sessions, as `PgClient.make` builds it (its
 * compiler, prepared statements, `COMMIT` checked) but with a hand on each checkout:
 * `PgClient` offers none, and the service times each statement
 * (`db_client_operation_duration_seconds`) and reports the pool's connections in use and idle
 * (`db_client_connections_usage`), which `PgPool` does not count. Every session carries the
 * statement and idle-in-transaction timeouts; the first connection is tried at start, retried
 * while the database refuses it (each retry logged) up to the start timeout. A checkout that has
 * to wait for another's session to come back waits no longer than the connect timeout.
 */
const makeClient = (
  options: ClientOptions
): Effect.Effect<SqlClient.SqlClient, SqlError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const poolConfig: PgPool.Config = {
      url: Redacted.make(options.url),
      maxConnections: options.maxConnections,
      idleTimeout,
      connectTimeout: options.connectTimeout,
      // A host that dies without a word (powered off, cut off) leaves its sockets open: the
      // probes end an idle one within the keepalive and ten probes a second apart.
      keepAlive: options.keepAlive,
      applicationName: options.applicationName,
      startupParameters: {
        statement_timeout: String(Duration.toMillis(options.statementTimeout)),
        idle_in_transaction_session_timeout: String(idleInTransactionMillis)
      }
    }
    const boundMillis = Duration.toMillis(options.statementTimeout) + 500
    const layerScope = yield* Effect.scope
    // `borrowers`: checkouts of the pool under way or lent. Once they are as many as its sessions, a
    // new one may have to wait for a session to come back, which `PgPool` would wait for unbounded.
    // `pools`: those not closed yet (one being replaced still lends), whose borrowers holding no
    // session are the checkouts waiting.
    type Sessions = { readonly pool: PgPool.PgPool; readonly scope: Scope.Closeable; borrowers: number }
    const pools = new Set<Sessions>()
    const openPool = Effect.flatMap(Scope.fork(layerScope), (scope) =>
      Effect.flatMap(Scope.provide(PgPool.make(poolConfig), scope), (pool) => {
        const sessions: Sessions = { pool, scope, borrowers: 0 }
        pools.add(sessions)
        return Effect.as(
          Scope.addFinalizer(
            scope,
            Effect.sync(() =>
              pools.delete(sessions)
            )
          ),
          sessions
        )
      }))
    const full = (sessions: Sessions) => sessions.borrowers >= options.maxConnections
    // Timed only when it may wait: the timeout races two fibers, which a checkout that finds a
    // session free (nearly every one) need not pay for.
    const waitedFor = <A, R>(take: Effect.Effect<A, SqlError, R>) =>
      Effect.timeoutOrElse(take, {
        duration: options.connectTimeout,
        orElse: () => Effect.fail(noSessionFree(options.connectTimeout))
      })

    // A server that let a statement go unanswered past its bound has stopped answering (stopped,
    // its host frozen, the network cut), and every session opened to it went with it, though
    // their sockets neither answer nor close: tried one by one, each would fail a request of its
    // own. The pool is replaced instead: checkouts go to a new one (sessions opened from now on,
    // to wherever the address points: a standby promoted), and the old one is closed once what
    // it lent is back, after a bound in which its statements end or are left.
    let current: Sessions = yield* openPool
    // Set by a connect that failed or a server left silent, cleared by the next session had.
    let unanswered = false
    const tryingOne = Semaphore.makeUnsafe(1)
    const silent = (sessions: Sessions): Effect.Effect<void> =>
      Effect.suspend(() => {
        unanswered = true
        if (current !== sessions) return Effect.void
        return Effect.flatMap(Effect.orDie(openPool), (replacement) => {
          if (current !== sessions) return Scope.close(replacement.scope, Exit.void)
          current = replacement
          return Effect.asVoid(Effect.forkIn(
            Effect.delay(Scope.close(sessions.scope, Exit.void), Duration.millis(2 * boundMillis)),
            layerScope
          ))
        })
      })

    yield* current.pool.use((session) => session.query("SELECT 1")).pipe(
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
    const failed = options.observed ? statementFailures("postgresql") : undefined
    const failedWith = (exit: Exit.Exit<unknown, unknown>) => {
      if (failed === undefined) return
      const error = Exit.findErrorOption(exit)
      if (Option.isSome(error) && isSqlError(error.value)) failed(error.value)
    }
    const usage = options.observed
      ? yield* connectionsUsage(options.maxConnections, () => {
        let borrowers = 0
        for (const sessions of pools) borrowers += sessions.borrowers
        return borrowers
      })
      : undefined

    // A transaction's session that was lost needs no `ROLLBACK` (the server ended the transaction
    // with it), and trying one would turn the transaction's failure into a defect. One whose
    // statement was left running is closed rather than rolled back: the `ROLLBACK` would wait
    // for that statement, and the server rolls back a transaction whose session ends.
    const lostTransactions = new WeakSet<Connection>()
    const wrapAs = (transaction: boolean) => (sessions: Sessions) => (session: PgConnection.PgConnection) => {
      const abandon = transaction ? () => void lostTransactions.add(connection) : undefined
      const connection: Connection = connectionOf(session, {
        durationOf,
        failed,
        traced: options.traced,
        boundMillis,
        retire: sessions.pool.invalidate(session),
        onLeft: abandon === undefined ? Effect.void : Effect.sync(abandon),
        noAnswer: silent(sessions),
        lost: abandon
      })
      return connection
    }
    const wrap = wrapAs(false)
    const checkout = (
      take: (pool: PgPool.PgPool) => Effect.Effect<PgConnection.PgConnection, SqlError, Scope.Scope>,
      wrapped: (sessions: Sessions) => (session: PgConnection.PgConnection) => Connection
    ) =>
      Effect.suspend(() => {
        const sessions = current
        const session = take(sessions.pool).pipe(
          Effect.tap(() => Effect.sync(() => (unanswered = false))),
          Effect.tapError((error) => Effect.sync(() => error.reason._tag === "ConnectionError" && (unanswered = true)))
        )
        const taken = unanswered
          ? Effect.flatMap(
            tryingOne.withPermitsIfAvailable(1)(waitedFor(session)),
            Option.match({ onNone: () => Effect.fail(notAnswering()), onSome: Effect.succeed })
          )
          : full(sessions)
          ? waitedFor(session)
          : session
        let lent = false
        // Counted and its release added in one uninterruptible step (an interruption between the
        // two would leave the count one too high), before the session's own release, so it runs
        // after it. A checkout that got no session failed before any statement could count the
        // failure: counted here.
        const counted = Effect.andThen(
          Effect.acquireRelease(Effect.sync(() => void sessions.borrowers++), (_, exit) =>
            Effect.sync(() => {
              sessions.borrowers--
              if (!lent) failedWith(exit)
            })),
          taken
        )
        return usage === undefined
          ? Effect.map(counted, wrapped(sessions))
          : Effect.flatMap(counted, (session) => {
            lent = true
            return Effect.as(
              Effect.acquireRelease(
                Effect.sync(() => usage.take(session)),
                () => Effect.sync(() => usage.give(session))
              ),
              wrapped(sessions)(session)
            )
          })
      })
    const acquirer = checkout((pool) => pool.get, wrap)
    return yield* SqlClient.make({
      acquirer,
      // `pool.use` lends without a scope: the cheaper path, taken per statement while a session
      // is sure to be free or opened; a checkout that may wait takes the timed one.
      borrower: (f) =>
        Effect.suspend(() => {
          const sessions = current
          if (full(sessions) || unanswered) return Effect.scoped(Effect.flatMap(acquirer, f))
          // Uninterruptible from the count to its release's registration, as in `checkout`.
          return Effect.uninterruptibleMask((restore) => {
            sessions.borrowers++
            let lent: PgConnection.PgConnection | undefined
            let had = false
            return Effect.onExit(
              restore(sessions.pool.use((session) => {
                had = true
                unanswered = false
                if (usage !== undefined) {
                  usage.take(session)
                  lent = session
                }
                return f(wrap(sessions)(session))
              })),
              (exit) =>
                Effect.sync(() => {
                  sessions.borrowers--
                  if (!had && isConnectionFailure(exit)) unanswered = true
                  if (lent !== undefined) usage?.give(lent)
                  // No session lent: the checkout failed, and no statement ran to count it.
                  else failedWith(exit)
                })
            )
          })
        }),
      transactionAcquirer: checkout((pool) => pool.reserve, wrapAs(true)),
      isTransaction: (connection) => !lostTransactions.has(connection),
      // PostgreSQL prepares transaction control like any other statement.
      prepareTransactionControls: true,
      commit,
      releaseSavepoint: (name) => `RELEASE SAVEPOINT ${name}`,
      compiler: PgClient.makeCompiler(),
      driver: "pg",
      // Its statement spans named by the system, which the tracer knows to stand aside for the service's.
      spanAttributes: [["db.system.name", "postgresql"]]
    })
  })

/**
 * The pool's connections in use and idle, its limit, and the checkouts waiting for a connection,
 * read at each scrape. In use: checked out now. Idle: the others given back within the pool's idle
 * timeout, after which the pool closes them (a session the pool retires sooner, its server gone,
 * counts until then). Waiting: the checkouts under way or lent (`borrowers`) that hold no session.
 */
const connectionsUsage = (maxConnections: number, borrowers: () => number) =>
  Effect.gen(function*() {
    const givenBack = new Map<PgConnection.PgConnection, number>()
    let used = 0
    const idle = () => {
      const since = performance.now() - Duration.toMillis(idleTimeout)
      for (const [session, at] of givenBack) if (at < since) givenBack.delete(session)
      return givenBack.size
    }
    const description = "PostgreSQL pool connections, by state: used (running a statement or a transaction) or idle"
    yield* readAtScrape("gauge", "db_client_connections_usage", description, { state: "used" }, () => used)
    yield* readAtScrape("gauge", "db_client_connections_usage", description, { state: "idle" }, idle)
    yield* readAtScrape("gauge", "db_client_connection_max", "The most connections the PostgreSQL pool opens", {}, () =>
      maxConnections)
    yield* readAtScrape(
      "gauge",
      "db_client_connection_pending_requests",
      "Requests waiting for a PostgreSQL pool connection",
      {},
      () =>
        Math.max(0, borrowers() - used)
    )
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
      Effect.interruptible(
        lock(0).pipe(
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
        )
      ),
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
    const traced = Option.exists(observability, ({ tracing }) => Option.isSome(tracing))
    const sql = yield* makeClient({
      url: config.databaseUrl,
      maxConnections: 20,
      applicationName: "petstore",
      connectTimeout: config.databaseConnectTimeout,
      statementTimeout: config.databaseStatementTimeout,
      startTimeout: config.databaseStartTimeout,
      keepAlive: config.databaseKeepAlive,
      observed: Option.exists(observability, ({ metrics }) => Option.isSome(metrics)),
      traced
    }).pipe(Effect.mapError((error) => cannotStart(config.databaseUrl, "connect to", error)))
    yield* writable(sql).pipe(Effect.mapError((error) => cannotStart(config.databaseUrl, "start on", error)))
    yield* migrate(sql, config.databaseStartTimeout).pipe(
      Effect.mapError((error) => cannotStart(config.databaseUrl, "migrate", error))
    )
    return traced ? withTransactionSpans(sql, "postgresql") : sql
  })
).pipe(Layer.provide(Reactivity.layer))
