import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Predicate } from "effect"
import Pg from "pg"
import { AppConfig } from "../AppConfig.js"
import { addCollector, type Series } from "../Observability/Exposition.js"
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

const durationOf = statementDurations("postgresql")

/**
 * A connection of the pool whose statements are timed (`db_client_operation_duration_seconds`):
 * `pg`'s pool makes its connections from the class it is given. `@effect/sql-pg` runs every
 * statement through the callback form of `query`.
 */
class TimedClient extends Pg.Client {
  override query(...args: Array<any>): any {
    const callback = args.at(-1)
    const text = typeof args[0] === "string" ? args[0] : args[0]?.text
    if (typeof text !== "string" || typeof callback !== "function") return (super.query as any)(...args)
    const histogram = durationOf(text)
    const start = performance.now()
    args[args.length - 1] = (...results: Array<unknown>) => {
      histogram.unsafeUpdate((performance.now() - start) / 1000, [])
      return callback(...results)
    }
    return (super.query as any)(...args)
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
const pgPool = (options: { readonly url: string; readonly max: number; readonly applicationName: string }) =>
  Effect.gen(function*() {
    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const pool = new Pg.Pool({
          connectionString: options.url,
          max: options.max,
          application_name: options.applicationName,
          Client: TimedClient
        })
        // An idle connection's error is the pool's to handle (it drops the connection); unheard, it would stop the process.
        pool.on("error", () => {})
        return pool
      }),
      (pool) => Effect.promise(() => pool.end()).pipe(Effect.timeoutOption("1 second"), Effect.interruptible)
    )
    yield* Effect.tryPromise({
      try: () => pool.query("SELECT 1"),
      catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
    }).pipe(
      Effect.timeoutFail({
        duration: "5 seconds",
        onTimeout: () => new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
      })
    )
    yield* Effect.acquireRelease(
      Effect.sync(() =>
        addCollector(() => [
          connectionsUsage("used", pool.totalCount - pool.idleCount),
          connectionsUsage("idle", pool.idleCount)
        ])
      ),
      (remove) => Effect.sync(remove)
    )
    return pool
  })

/**
 * The PostgreSQL database a `postgres://` `DATABASE_URL` names, as the `SqlClient` every store
 * runs on, through a pool of connections, with the numbered migrations applied before anything is
 * served. Instances starting together queue on an advisory lock held by one connection while the
 * migrator runs on the others, so the first migrates and the rest find nothing left to do; the
 * lock goes with its session if an instance dies meanwhile.
 */
export const PostgresConnection: Layer.Layer<SqlClient.SqlClient | PgClient.PgClient, Error, AppConfig> = Layer
  .unwrapEffect(
    Effect.map(AppConfig, ({ databaseUrl }) =>
      PgClient.layerFromPool({
        acquire: pgPool({ url: databaseUrl, max: 20, applicationName: "petstore" }),
        applicationName: "petstore",
        spanAttributes: { "db.system": "postgresql" }
      }).pipe(Layer.catchAll((error) => Layer.fail(cannotConnect(databaseUrl, error))))
    )
  ).pipe(
    Layer.tap((context) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const lockHolder = yield* sql.reserve
        yield* Effect.acquireRelease(
          lockHolder.executeRaw(`SELECT pg_advisory_lock(${migrationLock})`, []),
          () => Effect.ignore(lockHolder.executeRaw(`SELECT pg_advisory_unlock(${migrationLock})`, []))
        )
        yield* runMigrations
      }).pipe(Effect.scoped, Effect.provide(context))
    )
  )
