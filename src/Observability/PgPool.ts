import { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import Pg from "pg"
import { addCollector, type Series } from "./Exposition.js"
import { statementDurationOf, statementSummary } from "./Metrics.js"

/** Statements by their text: the service's are parameterised, so few; the cap guards against any other. */
const durations = new Map<string, ReturnType<typeof statementDurationOf>>()
const durationOf = (sql: string) => {
  let metric = durations.get(sql)
  if (metric === undefined) {
    const { operation, table } = statementSummary(sql)
    metric = statementDurationOf("postgresql", operation, table ?? "")
    if (durations.size < 1000) durations.set(sql, metric)
  }
  return metric
}

const connectionsUsage = (state: "used" | "idle", value: number): Series => ({
  kind: "gauge",
  name: "db_client_connections_usage",
  help: "PostgreSQL pool connections, by state: used (running a statement or a transaction) or idle",
  labels: [["state", state]],
  value
})

/** Times a connection's callback-style queries, the form `@effect/sql-pg` runs its statements in. */
const timeQueries = (client: Pg.PoolClient) => {
  const query = client.query.bind(client) as (...args: Array<any>) => any
  client.query = ((...args: Array<any>) => {
    const callback = args.at(-1)
    if (typeof args[0] !== "string" || typeof callback !== "function") return query(...args)
    const metric = durationOf(args[0])
    const start = performance.now()
    args[args.length - 1] = (...results: Array<unknown>) => {
      metric.unsafeUpdate((performance.now() - start) / 1000, [])
      return callback(...results)
    }
    return query(...args)
  }) as typeof client.query
}

/**
 * The pool of PostgreSQL connections, as `@effect/sql-pg` would make it, observed: each
 * statement's duration, and the connections in use (`db_client_connections_usage`) at each scrape.
 * Its first connection is tried at start, so a database that does not answer stops the start.
 */
export const observedPgPool = (options: { readonly url: string; readonly max: number; readonly applicationName: string }) =>
  Effect.gen(function*() {
    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const pool = new Pg.Pool({ connectionString: options.url, max: options.max, application_name: options.applicationName })
        // An idle connection's error is the pool's to handle (it drops the connection); unheard, it would stop the process.
        pool.on("error", () => {})
        pool.on("connect", timeQueries)
        return pool
      }),
      (pool) => Effect.promise(() => pool.end()).pipe(Effect.timeoutOption("1 second"))
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
