import { Context, Effect, Metric, type Scope } from "effect"

/** The context whose registry is the default one, where every series is recorded outside any effect. */
export const defaultRegistry: Context.Context<never> = Context.empty()

/** `series` in the registry now, at 0 (one that first appears with its first event is one whose `rate()` misses it). */
export const registered = (series: Metric.Metric<number, unknown>): (value: number) => void => {
  series.valueUnsafe(defaultRegistry)
  return (value) => series.updateUnsafe(value, defaultRegistry)
}

/** Seconds: 1 ms to 10 s, the semantic conventions' advice for HTTP durations. */
const durationBoundaries = Metric.boundariesFromIterable(
  [0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]
)

/** A metric per series, not `Metric.withAttributes` ([benchmarks](../../docs/benchmarks.md#the-librarys-pieces)). */
export const requestDurationOf = (method: string, route: string, status: number): (seconds: number) => void =>
  registered(Metric.histogram("http_server_request_duration_seconds", {
    description: "Duration of HTTP server requests, by method, route template and status code",
    boundaries: durationBoundaries,
    attributes: { http_request_method: method, http_route: route, http_response_status_code: String(status) }
  }))

const activeRequests = Metric.gauge("http_server_active_requests", { description: "HTTP server requests being served" })

export const adjustActiveRequests = (delta: number): void => activeRequests.modifyUnsafe(delta, defaultRegistry)

/** Statements are short: 10 µs to 1 s. */
const statementBoundaries = Metric.boundariesFromIterable(
  [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]
)

const counterOf = (name: string, description: string, attributes?: Record<string, string>): () => void => {
  const add = registered(Metric.counter(name, { description, incremental: true, ...(attributes && { attributes }) }))
  return () => add(1)
}

/** Counts requests refused with 429 by the rate-limit policy named (`per-key`, `failed-authentication`). */
export const rateLimitedCounter = (policy: string): () => void =>
  counterOf("petstore_rate_limited_requests_total", "Requests refused with 429 by a rate-limit policy", { policy })

/** Counts requests refused with 401 for the error code given (`missing_api_key`, `invalid_api_key`). */
export const failedAuthenticationCounter = (reason: string): () => void =>
  counterOf("petstore_failed_authentications_total", "Requests refused with 401, by reason (the error code)", {
    reason
  })

export const petsCreatedCounter = () => counterOf("petstore_pets_created_total", "Animals added to the catalogue")

/** Counts SQL statements that failed, by `error_type` (effect/sql's reason), each type at 0 from the start. */
export const statementFailureCounter = (system: string, errorType: string): () => void =>
  counterOf(
    "db_client_operation_errors_total",
    "SQL statements that failed, by database system and error type (the reason of effect/sql's SqlError)",
    { db_system_name: system, error_type: errorType }
  )

/** A SQL statement's duration in seconds; one on no table (`BEGIN`, `SELECT 1`) has no table label. */
export const statementDurationOf = (system: string, operation: string, table: string | undefined) => {
  const series = Metric.histogram("db_client_operation_duration_seconds", {
    description: "Duration of SQL statements, by database system, operation and table",
    boundaries: statementBoundaries,
    attributes: {
      db_system_name: system,
      db_operation_name: operation,
      ...(table === undefined ? {} : { db_collection_name: table })
    }
  })
  return (seconds: number) => series.updateUnsafe(seconds, defaultRegistry)
}

/** Read at each scrape while the scope lasts: a count kept elsewhere (a pool's connections, the process's memory). */
export const readAtScrape = (
  kind: "gauge" | "counter",
  name: string,
  description: string,
  attributes: Record<string, string>,
  read: () => number
): Effect.Effect<void, never, Scope.Scope> => {
  const options = { description, attributes }
  const series: Metric.Metric<number, unknown> = kind === "gauge"
    ? Metric.gauge(name, options)
    : Metric.counter(name, options)
  const get = kind === "gauge" ? () => ({ value: read() }) : () => ({ count: read(), incremental: true })
  return Effect.acquireRelease(
    Effect.sync(() => Metric.registerUnsafe(series, defaultRegistry, { get, update: () => {}, modify: () => {} })),
    (registration) => Effect.sync(registration.remove)
  )
}
