import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Layer, Predicate, Schedule } from "effect"
import Pg from "pg"
import { AppConfig } from "../Config/AppConfig.js"
import { addCollector, type Series } from "../Observability/Exposition.js"
import { connectionOutsideTransactions, makeDirectClient } from "./DirectStatements.js"
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
  const cause = Predicate.hasProperty(error, "cause") ? error.cause : error
  const reason = cause instanceof Error ? cause.message : String(cause)
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

const reasonOf = (error: SqlError) => (error.cause instanceof Error ? error.cause.message : String(error.cause))

/** Refused, or up but not yet accepting sessions: worth another try while the database starts. */
const isRefused = (error: SqlError) =>
  Predicate.hasProperty(error.cause, "code") && ["ECONNREFUSED", "57P03"].includes(String(error.cause.code))

/**
 * The class of a pool's connections, whose statements are timed
 * (`db_client_operation_duration_seconds`): `pg`'s pool makes its connections from the class it
 * is given. `@effect/sql-pg` runs every statement through the callback form of `query`. Each pool
 * keeps its own statements' histograms.
 */
const timedClient = () => {
  const durationOf = statementDurations("postgresql")
  return class TimedClient extends Pg.Client {
    override query(...args: Array<any>): any {
      const callback = args.at(-1)
      const text = typeof args[0] === "string" ? args[0] : args[0]?.text
      if (typeof text !== "string" || typeof callback !== "function") return Reflect.apply(super.query, this, args)
      const histogram = durationOf(text)
      const start = performance.now()
      args[args.length - 1] = (...results: Array<unknown>) => {
        histogram.unsafeUpdate((performance.now() - start) / 1000, [])
        return callback(...results)
      }
      return Reflect.apply(super.query, this, args)
    }
  }
}

const connectionsUsage = (state: "used" | "idle", value: number): Series => ({
  kind: "gauge",
  name: "db_client_connections_usage",
  help: "PostgreSQL pool connections, by state: used (running a statement or a transaction) or idle",
  labels: [["state", state]],
  value
})

/**
 * The pool of PostgreSQL connections `@effect/sql-pg` runs on, with the connections in use and
 * idle (`db_client_connections_usage`) read from it at each scrape. Its first connection is tried
 * at start, so a database that does not answer stops the start.
 */
const pgPool = (options: {
  readonly url: string
  readonly max: number
  readonly applicationName: string
  readonly connectTimeout: Duration.Duration
  readonly statementTimeout: Duration.Duration
  readonly startTimeout: Duration.Duration
}) =>
  Effect.gen(function*() {
    const statementMillis = Duration.toMillis(options.statementTimeout)
    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => {
        // `pg` waits forever by default. The server ends a statement or an idle transaction past
        // its timeout, and the client gives up on one the server never answers (a hung host).
        const pool = new Pg.Pool({
          connectionString: options.url,
          max: options.max,
          application_name: options.applicationName,
          Client: timedClient(),
          connectionTimeoutMillis: Duration.toMillis(options.connectTimeout),
          statement_timeout: statementMillis,
          query_timeout: statementMillis + 500,
          idle_in_transaction_session_timeout: idleInTransactionMillis
        })
        // An idle connection's error is the pool's to handle (it drops the connection); unheard, it would stop the process.
        pool.on("error", () => {})
        return pool
      }),
      (pool) => Effect.promise(() => pool.end()).pipe(Effect.timeoutOption("1 second"), Effect.interruptible)
    )
    // A database that refuses connections may be starting with the service: retried, each retry
    // logged, up to the start timeout. One that does not answer fails at the connect timeout.
    yield* Effect.tryPromise({
      try: () => pool.query("SELECT 1"),
      catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
    }).pipe(
      Effect.retry({
        while: isRefused,
        schedule: Schedule.exponential("200 millis").pipe(
          Schedule.either(Schedule.spaced("2 seconds")),
          Schedule.upTo(options.startTimeout),
          Schedule.tapInput((error: SqlError) =>
            Effect.logWarning("the database refuses connections; retrying").pipe(
              Effect.annotateLogs({ reason: reasonOf(error) })
            )
          )
        )
      })
    )
    yield* addCollector(() => [
      connectionsUsage("used", pool.totalCount - pool.idleCount),
      connectionsUsage("idle", pool.idleCount)
    ])
    return pool
  })

/**
 * `@effect/sql-pg`'s client on the pool, with the numbered migrations applied before anything is
 * served. Instances starting together queue on an advisory lock held by one connection while the
 * migrator runs on the others, so the first migrates and the rest find nothing left to do; the
 * lock goes with its session if an instance dies meanwhile.
 */
const MigratedPgClient: Layer.Layer<SqlClient.SqlClient | PgClient.PgClient, Error, AppConfig> = Layer
  .unwrapEffect(
    Effect.map(AppConfig, (config) =>
      PgClient.layerFromPool({
        acquire: pgPool({
          url: config.databaseUrl,
          max: 20,
          applicationName: "petstore",
          connectTimeout: config.databaseConnectTimeout,
          statementTimeout: config.databaseStatementTimeout,
          startTimeout: config.databaseStartTimeout
        }),
        applicationName: "petstore",
        spanAttributes: { "db.system": "postgresql" }
      }).pipe(Layer.catchAll((error) => Layer.fail(cannotConnect(config.databaseUrl, error))))
    )
  ).pipe(
    Layer.tap((context) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { databaseStartTimeout } = yield* AppConfig
        const lockHolder = yield* sql.reserve
        const tryLock = Effect.map(
          lockHolder.executeRaw(`SELECT pg_try_advisory_lock(${migrationLock}) AS locked`, []),
          (result) => (result as unknown as Pg.QueryResult<{ readonly locked: boolean }>).rows[0]?.locked === true
        )
        // Polled rather than waited for in one statement, which the statement timeout would cut;
        // said every 5 s while another instance holds it.
        const lock = (polls: number): Effect.Effect<void, SqlError> =>
          Effect.flatMap(tryLock, (locked) =>
            locked ? Effect.void : Effect.zipRight(
              polls % 20 === 0 ? Effect.logInfo("waiting for another instance to finish the migrations") : Effect.void,
              Effect.delay(Effect.suspend(() => lock(polls + 1)), "250 millis")
            ))
        // Interruptible, so that its bound and a stop signal can end the wait.
        yield* Effect.acquireRelease(
          Effect.interruptible(lock(0).pipe(
            Effect.timeoutFail({
              duration: databaseStartTimeout,
              onTimeout: () =>
                new Error(
                  `Another instance held the migrations' lock for longer than ${Duration.format(databaseStartTimeout)} ` +
                    "(DATABASE_START_TIMEOUT_SECONDS); is a migration stuck?"
                )
            })
          )),
          () => Effect.ignore(lockHolder.executeRaw(`SELECT pg_advisory_unlock(${migrationLock})`, []))
        )
        yield* runMigrations
      }).pipe(Effect.scoped, Effect.provide(context))
    )
  )

/**
 * The PostgreSQL database a `postgres://` `DATABASE_URL` names, as the `SqlClient` every store
 * runs on, through a pool of connections, migrated as above. Statements run as SQLite's do
 * (`DirectStatements.ts`), on `@effect/sql-pg`'s own connection.
 */
export const PostgresConnection: Layer.Layer<SqlClient.SqlClient, Error, AppConfig> = Layer.effect(
  SqlClient.SqlClient,
  Effect.gen(function*() {
    const client = yield* PgClient.PgClient
    const outside = yield* Effect.orDie(connectionOutsideTransactions(client))
    return makeDirectClient(client, "postgresql", { run: (sql, params) => outside.execute(sql, params, undefined) })
  })
).pipe(Layer.provide(MigratedPgClient))
