import { PgClient, type PgConnection, PgPool } from "@effect/sql-pg"
import { Duration, Effect, Exit, Fiber, Layer, Option, Predicate, Redacted, Schedule, Scope, Semaphore } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql"
import type { Connection } from "effect/sql/SqlConnection"
import { isSqlError, type SqlError, UnknownError } from "effect/sql/SqlError"
import { AppConfig } from "../Config/AppConfig.js"
import { readAtScrape } from "../Observability/Metrics.js"
import { ObservabilityConfig } from "../Observability/ObservabilityConfig.js"
import { connectionError, databaseWords, driverCode, isReadOnly, sqlError } from "./DatabaseErrors.js"
import type { Run } from "./DirectStatements.js"
import { runMigrations } from "./Migrations.js"
import { startStatementSpan, withTransactionSpans } from "./StatementSpans.js"
import { statementDurations, statementFailures } from "./StatementTiming.js"

const maxConnections = 20
const idleTimeout = Duration.seconds(10)
/** The migrations' advisory lock: any number, the same on every instance. */
const migrationLock = 7_346_270_001

/** A URL part percent-decoded, or as it is when it does not decode. */
export const decode = (text: string) => Option.getOrElse(Option.liftThrowable(decodeURIComponent)(text), () => text)

/** Why the service cannot start, naming host and port, never the password (the driver may quote it decoded). */
const cannotStart = (databaseUrl: string, doing: string) => (error: unknown): Error => {
  // Quoting the value could show its password.
  if (!URL.canParse(databaseUrl)) {
    return new Error(
      "DATABASE_URL is not a valid postgres:// URL (a password's reserved characters must be percent-encoded)"
    )
  }
  const { hostname, password, port } = new URL(databaseUrl)
  let words = isSqlError(error) ? databaseWords(error) : error instanceof Error ? error.message : String(error)
  if (password !== "") words = words.replaceAll(password, "***").replaceAll(decode(password), "***")
  const address = `${hostname || "localhost"}:${port || "5432"}`
  return new Error(`Cannot ${doing} the PostgreSQL database at ${address} that DATABASE_URL names: ${words}`)
}

/** A standby or a database whose sessions are read-only cannot serve creates nor migrate: refused at start. */
const writable = (sql: SqlClient.SqlClient) =>
  Effect.flatMap(
    sql<{ standby: boolean; read_only: string }>`
      SELECT pg_is_in_recovery() AS standby, current_setting('transaction_read_only') AS read_only`,
    ([row]) => {
      const why = row?.standby === true
        ? "it is a standby (in recovery), which takes no writes; point DATABASE_URL at the primary"
        : row?.read_only === "on"
        ? "it is read-only (its sessions' default_transaction_read_only is on); make it writable"
        : undefined
      return why === undefined ? Effect.void : Effect.fail(new Error(why))
    }
  )

const sqlErrorOf = (exit: Exit.Exit<unknown, unknown>): SqlError | undefined =>
  Option.getOrUndefined(Option.filter(Exit.findErrorOption(exit), isSqlError))

/** While PostgreSQL is not answering, a checkout that another is already trying for. */
const notAnswering = () =>
  Effect.fail(
    connectionError("PostgreSQL is not answering; one connection at a time is tried until it does", "connect")
  )

/** A session's failure that leaves it unusable: lost, or ended by the server (a `FATAL` error). */
const isLost = ({ reason: { _tag, cause } }: SqlError) =>
  _tag === "ConnectionError" ||
  (Predicate.hasProperty(cause, "severity") && (cause.severity === "FATAL" || cause.severity === "PANIC"))

/** Closed, not given back: a session still busy with a cancelled statement, or keeping its read-only default. */
const spoils = (error: SqlError) => error.reason._tag === "StatementTimeoutError" || isReadOnly(error)

/** PostgreSQL answers a `COMMIT` of a transaction already failed with `ROLLBACK`: that is a failure. */
const commit = (connection: Connection): Effect.Effect<void, SqlError> =>
  Effect.flatMap(connection.executeRaw("COMMIT", []), (result) =>
    (result as PgConnection.Result).command === "ROLLBACK"
      ? Effect.fail(sqlError(UnknownError, "COMMIT rolled back an aborted transaction", "commit"))
      : Effect.void)

/** A statement its caller leaves, interrupted or unanswered in `boundMillis`: it is interrupted in the background. */
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
        // A plain timer: `Effect.timeoutOrElse` races a fiber per statement.
        const timer = setTimeout(() => {
          stopWatching()
          const error = connectionError(
            `PostgreSQL did not answer within ${Duration.format(Duration.millis(boundMillis))}`,
            "execute"
          )
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

/** `PgClient.make`'s client with a hand on each checkout (docs/architecture.md); the first connection retried while refused. */
const makeClient = (config: AppConfig["Service"], observed: boolean, traced: boolean) =>
  Effect.gen(function*() {
    const poolConfig: PgPool.Config = {
      url: Redacted.make(config.databaseUrl),
      maxConnections,
      idleTimeout,
      connectTimeout: config.databaseConnectTimeout,
      // A host that dies without a word leaves its sockets open: the probes end an idle one.
      keepAlive: config.databaseKeepAlive,
      applicationName: "petstore",
      startupParameters: {
        statement_timeout: String(Duration.toMillis(config.databaseStatementTimeout)),
        // A transaction left idle this long is ended by the server, freeing its locks and connection.
        idle_in_transaction_session_timeout: "10000"
      }
    }
    // A statement unanswered past its timeout and half a second has a server that answers nothing.
    const boundMillis = Duration.toMillis(config.databaseStatementTimeout) + 500
    const layerScope = yield* Effect.scope
    // `borrowers`: checkouts under way or lent, of one pool and of all. Once a pool's are as many as
    // its sessions, the next may wait for one to come back, unbounded in `PgPool`: it is timed then.
    type Sessions = { readonly pool: PgPool.PgPool; readonly scope: Scope.Closeable; borrowers: number }
    let borrowers = 0
    const count = (sessions: Sessions, by: 1 | -1) => {
      sessions.borrowers += by
      borrowers += by
    }
    const openPool = Effect.flatMap(
      Scope.fork(layerScope),
      (scope) =>
        Effect.map(Scope.provide(PgPool.make(poolConfig), scope), (pool): Sessions => ({ pool, scope, borrowers: 0 }))
    )
    const full = (sessions: Sessions) => sessions.borrowers >= maxConnections
    // Timed only when it may wait: the timeout races two fibers, which nearly every checkout need not pay for.
    const connectTimeout = Duration.format(config.databaseConnectTimeout)
    const waitedFor = <A, R>(take: Effect.Effect<A, SqlError, R>) =>
      Effect.timeoutOrElse(take, {
        duration: config.databaseConnectTimeout,
        orElse: () =>
          Effect.fail(connectionError(
            `No PostgreSQL connection came free within ${connectTimeout} (DATABASE_CONNECT_TIMEOUT_SECONDS)`,
            "connect"
          ))
      })

    // A silent server took every session opened to it: the pool is replaced, the old one closed later.
    let current = yield* openPool
    // While PostgreSQL does not answer, one checkout at a time tries it: a connect given up on stays in
    // the listen queue, and a server coming back would start those first, failing requests for seconds.
    let unanswered = false
    const tryingOne = Semaphore.makeUnsafe(1)
    const silent = (sessions: Sessions): Effect.Effect<void> =>
      Effect.suspend(() => {
        unanswered = true
        if (current !== sessions) return Effect.void
        return Effect.flatMap(Effect.orDie(openPool), (replacement) => {
          if (current !== sessions) return Scope.close(replacement.scope, Exit.void)
          current = replacement
          const closeOld = Effect.delay(Scope.close(sessions.scope, Exit.void), Duration.millis(2 * boundMillis))
          return Effect.asVoid(Effect.forkIn(closeOld, layerScope))
        })
      })

    yield* current.pool.use((session) => session.query("SELECT 1")).pipe(
      Effect.retry({
        schedule: Schedule.min([Schedule.exponential("200 millis"), Schedule.spaced("2 seconds")]).pipe(
          Schedule.upTo({ duration: config.databaseStartTimeout }),
          // Refused, or up but not yet accepting sessions (57P03): worth another try, and logged, while it starts.
          Schedule.while(({ input }) => ["ECONNREFUSED", "57P03"].includes(driverCode(input as SqlError) ?? "")),
          Schedule.tap(({ input }) =>
            Effect.logWarning("the database refuses connections; retrying").pipe(
              Effect.annotateLogs({ reason: databaseWords(input as SqlError) })
            )
          )
        )
      })
    )
    const durationOf = observed ? statementDurations("postgresql") : undefined
    const failed = observed ? statementFailures("postgresql") : undefined
    // A checkout that got no session counts its failure, as no statement ran to count it.
    const failedWith = (exit: Exit.Exit<unknown, unknown>) => {
      const error = failed === undefined ? undefined : sqlErrorOf(exit)
      if (error !== undefined) failed?.(error)
    }
    const usage = observed ? yield* connectionsUsage(() => borrowers) : undefined

    // A transaction's session lost needs no `ROLLBACK` (trying one would make its failure a defect),
    // and one whose statement was left is closed instead (a `ROLLBACK` would wait for the statement).
    const lostTransactions = new WeakSet<Connection>()
    const connectionOf = (sessions: Sessions, transaction: boolean) => (session: PgConnection.PgConnection) => {
      const retire = sessions.pool.invalidate(session)
      const lose = () => transaction && lostTransactions.add(connection)
      const left = Effect.andThen(retire, Effect.sync(lose))
      const unanswered = (error: SqlError) => Effect.andThen(Effect.sync(() => failed?.(error)), silent(sessions))
      const run = <A>(sql: string, statement: Effect.Effect<A, SqlError>): Effect.Effect<A, SqlError> => {
        const watched = Effect.tapError(statement, (error) => {
          failed?.(error)
          if (isLost(error)) lose()
          return spoils(error) ? retire : Effect.void
        })
        const timed = durationOf === undefined && !traced ? watched : Effect.suspend(() => {
          const start = performance.now()
          const span = traced ? startStatementSpan("postgresql", sql) : undefined
          // Metrics off and the request not sampled: nothing to note when it ends.
          if (span === undefined && durationOf === undefined) return watched
          return Effect.onExit(watched, (exit) =>
            Effect.sync(() => {
              durationOf?.(sql)((performance.now() - start) / 1000)
              span?.(exit)
            }))
        })
        return leavable(timed, boundMillis, left, unanswered)
      }
      const rows = (prepare: boolean): Connection["execute"] => (sql, params, transformRows) => {
        const read = run(sql, Effect.map(session.query(sql, params, prepare), (result) => result.rows))
        return transformRows === undefined ? read : Effect.map(read, transformRows)
      }
      const connection: Connection = {
        execute: rows(true),
        executeRaw: (sql, params) => run(sql, session.query(sql, params)),
        executeValues: (sql, params) => run(sql, session.queryValues(sql, params)),
        executeValuesUnprepared: (sql, params) => run(sql, session.queryValues(sql, params, false)),
        executeUnprepared: rows(false),
        executeStream: (sql, params) => session.stream(sql, params)
      }
      return connection
    }
    const checkout = (transaction: boolean) =>
      Effect.suspend(() => {
        const sessions = current
        const session = (transaction ? sessions.pool.reserve : sessions.pool.get).pipe(
          Effect.onExit((exit) =>
            Effect.sync(() => {
              if (Exit.isSuccess(exit)) unanswered = false
              else if (sqlErrorOf(exit)?.reason._tag === "ConnectionError") unanswered = true
            })
          )
        )
        const taken = unanswered
          ? Effect.flatMap(
            tryingOne.withPermitsIfAvailable(1)(waitedFor(session)),
            Option.match({ onNone: notAnswering, onSome: Effect.succeed })
          )
          : full(sessions)
          ? waitedFor(session)
          : session
        let lent = false
        // Counted and its release added in one uninterruptible step, before the session's own release.
        const counted = Effect.andThen(
          Effect.acquireRelease(Effect.sync(() => count(sessions, 1)), (_, exit) =>
            Effect.sync(() => {
              count(sessions, -1)
              if (!lent) failedWith(exit)
            })),
          taken
        )
        return Effect.flatMap(counted, (session) => {
          lent = true
          const connection = connectionOf(sessions, transaction)(session)
          if (usage === undefined) return Effect.succeed(connection)
          const take = Effect.sync(() => usage.take(session))
          return Effect.as(Effect.acquireRelease(take, () => Effect.sync(() => usage.give(session))), connection)
        })
      })
    const acquirer = checkout(false)
    // `pool.use` lends without a scope, the cheaper path, while a checkout cannot have to wait.
    const borrower = <A, E, R>(f: (connection: Connection) => Effect.Effect<A, E, R>) =>
      Effect.suspend(() => {
        const sessions = current
        if (full(sessions) || unanswered) return Effect.scoped(Effect.flatMap(acquirer, f))
        // Uninterruptible from the count to its release's registration, as in `checkout`.
        return Effect.uninterruptibleMask((restore) => {
          count(sessions, 1)
          let lent: PgConnection.PgConnection | undefined
          return Effect.onExit(
            restore(sessions.pool.use((session) => {
              lent = session
              unanswered = false
              usage?.take(session)
              return f(connectionOf(sessions, false)(session))
            })),
            (exit) =>
              Effect.sync(() => {
                count(sessions, -1)
                if (lent !== undefined) return usage?.give(lent)
                failedWith(exit)
                if (sqlErrorOf(exit)?.reason._tag === "ConnectionError") unanswered = true
              })
          )
        })
      })
    const client = yield* SqlClient.make({
      acquirer,
      borrower,
      transactionAcquirer: checkout(true),
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
    const runDirect: Run = (sql, params, f) => borrower((on) => Effect.map(on.execute(sql, params, undefined), f))
    return Object.assign(client, { runDirect })
  })

/** The pool's gauges, read at each scrape; idle: given back within the idle timeout, when the pool closes them. */
const connectionsUsage = (borrowers: () => number) =>
  Effect.gen(function*() {
    const givenBack = new Map<PgConnection.PgConnection, number>()
    let used = 0
    const idle = () => {
      const since = performance.now() - Duration.toMillis(idleTimeout)
      for (const [session, at] of givenBack) if (at < since) givenBack.delete(session)
      return givenBack.size
    }
    const byState = "PostgreSQL pool connections, by state: used (running a statement or a transaction) or idle"
    yield* readAtScrape("gauge", "db_client_connections_usage", byState, { state: "used" }, () => used)
    yield* readAtScrape("gauge", "db_client_connections_usage", byState, { state: "idle" }, idle)
    yield* readAtScrape("gauge", "db_client_connection_max", "The most connections the PostgreSQL pool opens", {}, () =>
      maxConnections)
    const waiting = "Requests waiting for a PostgreSQL pool connection"
    yield* readAtScrape("gauge", "db_client_connection_pending_requests", waiting, {}, () =>
      Math.max(0, borrowers() - used))
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

/** Instances migrate one at a time under an advisory lock, which goes with its session if an instance dies. */
const migrate = (sql: SqlClient.SqlClient, startTimeout: Duration.Duration) =>
  Effect.scoped(Effect.gen(function*() {
    const lockHolder = yield* sql.reserve
    const statement = (text: string) => lockHolder.execute(text, [], undefined)
    const stuck = `Another instance held the migrations' lock for longer than ${Duration.format(startTimeout)} ` +
      "(DATABASE_START_TIMEOUT_SECONDS); is a migration stuck?"
    // Polled: one statement waiting for it would be cut by the statement timeout.
    const tryLock = statement(`SELECT pg_try_advisory_lock(${migrationLock}) AS locked`)
    const lock = Effect.map(tryLock, (rows) => rows[0]?.locked === true).pipe(
      Effect.repeat(
        Schedule.spaced("250 millis").pipe(
          Schedule.while(({ input }) => input !== true),
          Schedule.tap(({ attempt }) =>
            attempt % 20 === 1 ? Effect.logInfo("waiting for another instance to finish the migrations") : Effect.void
          )
        )
      ),
      Effect.timeoutOrElse({ duration: startTimeout, orElse: () => Effect.fail(new Error(stuck)) }),
      Effect.interruptible
    )
    yield* Effect.acquireRelease(lock, () => Effect.ignore(statement(`SELECT pg_advisory_unlock(${migrationLock})`)))
    yield* Effect.provideService(runMigrations, SqlClient.SqlClient, sql)
  }))

/** The PostgreSQL database `DATABASE_URL` names, checked writable and migrated before anything is served. */
export const PostgresConnection: Layer.Layer<SqlClient.SqlClient, Error, AppConfig> = Layer.effect(
  SqlClient.SqlClient,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const observability = yield* Effect.serviceOption(ObservabilityConfig)
    const traced = Option.exists(observability, ({ tracing }) => Option.isSome(tracing))
    const observed = Option.exists(observability, ({ metrics }) => Option.isSome(metrics))
    const { databaseUrl } = config
    const sql = yield* Effect.mapError(makeClient(config, observed, traced), cannotStart(databaseUrl, "connect to"))
    yield* Effect.mapError(writable(sql), cannotStart(databaseUrl, "start on"))
    yield* Effect.mapError(migrate(sql, config.databaseStartTimeout), cannotStart(databaseUrl, "migrate"))
    return traced ? withTransactionSpans(sql, "postgresql") : sql
  })
).pipe(Layer.provide(Reactivity.layer))
