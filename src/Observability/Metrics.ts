import { Metric, MetricBoundaries, MetricLabel } from "effect"

/**
 * The service's metrics, named and labelled as the OpenTelemetry semantic conventions are spelled
 * for Prometheus. Each labelled series is made once and kept, so recording one is a bucket update,
 * never a new metric key.
 */

/** Seconds: 1 ms to 10 s, the semantic conventions' advice for HTTP durations. */
const durationBoundaries = MetricBoundaries.fromIterable([
  0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10
])

export const requestDuration = Metric.histogram(
  "http_server_request_duration_seconds",
  durationBoundaries,
  "Duration of HTTP server requests, by method, route template and status code"
)

export const activeRequests = Metric.gauge("http_server_active_requests", {
  description: "HTTP server requests being served"
})

export const petsCreated = Metric.counter("petstore_pets_created_total", {
  description: "Animals added to the catalogue",
  incremental: true
})

/** Statements are short: 10 µs to 1 s. */
const statementBoundaries = MetricBoundaries.fromIterable([
  0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1
])

const statementDuration = Metric.histogram(
  "db_client_operation_duration_seconds",
  statementBoundaries,
  "Duration of SQL statements, by database system, operation and table"
)

const rateLimited = Metric.counter("petstore_rate_limited_requests_total", {
  description: "Requests refused with 429 by a rate-limit policy",
  incremental: true
})

const failedAuthentications = Metric.counter("petstore_failed_authentications_total", {
  description: "Requests refused with 401, by reason (the error code)",
  incremental: true
})

/** Metrics by a label value, made on first use: for label sets known to be small. */
const byLabels = <T>(make: (key: string) => T) => {
  const made = new Map<string, T>()
  return (key: string): T => {
    let metric = made.get(key)
    if (metric === undefined) {
      metric = make(key)
      made.set(key, metric)
    }
    return metric
  }
}

const rateLimitedBy = byLabels((policy) => Metric.tagged(rateLimited, "policy", policy))
const failedAuthenticationBy = byLabels((reason) => Metric.tagged(failedAuthentications, "reason", reason))

/** Counts a request refused with 429 by the rate-limit policy named (`per-key`, `failed-authentication`). */
export const countRateLimited = (policy: string): void => rateLimitedBy(policy).unsafeUpdate(1, [])

/** Counts a request refused with 401, by the error code given (`missing_api_key`, `invalid_api_key`). */
export const countFailedAuthentication = (reason: string): void => failedAuthenticationBy(reason).unsafeUpdate(1, [])

export const countPetCreated = (): void => petsCreated.unsafeUpdate(1, [])

/** A statement's operation (`SELECT`, …) and the table it names first, for its labels and its span. */
export const statementSummary = (sql: string): { readonly operation: string; readonly table: string | undefined } => ({
  operation: /^\s*(\w+)/.exec(sql)?.[1]?.toUpperCase() ?? "OTHER",
  table: /\b(?:FROM|INTO|UPDATE|TABLE)\s+"?(\w+)/i.exec(sql)?.[1]
})

/** The duration histogram of one SQL statement: its system, operation and table. */
export const statementDurationOf = (system: string, operation: string, table: string) => Metric.taggedWithLabels(statementDuration, [
    MetricLabel.make("db_system_name", system),
    MetricLabel.make("db_operation_name", operation),
    MetricLabel.make("db_collection_name", table)
  ])
