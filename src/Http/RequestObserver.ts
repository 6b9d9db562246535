import { Clock, Effect, Exit } from "effect"
import type { HttpServerRequest, HttpServerResponse } from "effect/http"
import { adjustActiveRequests } from "../Observability/Metrics.js"
import type { Sampler } from "../Observability/Sampler.js"
import { callerSpanOf, externalSpanOf } from "../Observability/TraceContext.js"
import { sampled, serverSpan } from "../Observability/Tracing.js"
import type { ClientAddress } from "../Request/ClientAddress.js"
import { CurrentRequest, RequestRecord } from "../Request/CurrentRequest.js"
import { statusOf } from "./RequestStatus.js"
import { pathOf } from "./Routes.js"
import { makeRouteLabels, methodLabel, unmatchedRoute } from "./RouteTemplates.js"

type App<E, R> = Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>

/**
 * Where a request enters: its record (`Request/CurrentRequest.ts`) made and provided to everything
 * below, and, when metrics or traces are on or `ended` is given, the request-duration histogram by
 * method, route template and status, the gauge of requests in flight, and, with tracing, the
 * trace's sampling, then, when sampled, the request's server span (continuing the caller's
 * `traceparent`). A sampled request's span gets the HTTP semantic-convention attributes, is on its
 * record and is the parent of every span below; any other request runs with no span at all, so
 * none below it is recorded. Never a header: the Authorization header stays out of every span.
 * `ended` is called with the request's route template and status once it is answered (the request
 * log), in the same step as the metrics.
 *
 * The server span is made here rather than by the platform's `HttpMiddleware.tracer` (kept off in
 * `Server.ts`), which would take its parent from `HttpTraceContext.fromHeaders` (B3 headers
 * followed, a `traceparent` of a later version refused: `Sampling.test.ts`, "traceparent"), write
 * `http.route` in the router's syntax (`/v1/pets/:petId`, where the service's spans, metrics and
 * logs name `/v1/pets/{petId}`: `Tracing.test.ts`), and add `url.full`, `url.query` and
 * `server.*`, which the service's spans never carried.
 */
export const makeRequestObserver = (options: {
  readonly clientAddress: (request: HttpServerRequest.HttpServerRequest) => ClientAddress
  readonly metrics: boolean
  /** With tracing: whether a trace is recorded, asked once per request before any span is made. */
  readonly sample: Sampler | undefined
  readonly ended?: ((record: RequestRecord, route: string, status: number) => void) | undefined
}) => {
  const { clientAddress, ended, metrics, sample } = options
  const routeOf = makeRouteLabels(metrics)
  /** The request's route labels, once it is answered (its route noted by then, if one matched). */
  const record = (current: RequestRecord, status: number) => {
    const labels = routeOf(current.request.method, current.route)
    if (metrics) {
      adjustActiveRequests(-1)
      labels.recordDuration(status, (performance.now() - current.startedAt) / 1000)
    }
    ended?.(current, labels.route, status)
    return labels
  }

  const plain = <E, R>(request: HttpServerRequest.HttpServerRequest, app: App<E, R>): App<E, R> =>
    Effect.provideService(app, CurrentRequest, new RequestRecord(request, clientAddress, performance.now(), undefined))

  const measured = <E, R>(request: HttpServerRequest.HttpServerRequest, app: App<E, R>): App<E, R> => {
    if (!metrics && ended === undefined) return plain(request, app)
    const current = new RequestRecord(request, clientAddress, performance.now(), undefined)
    if (metrics) adjustActiveRequests(1)
    // However the request ends, its client gone included.
    return Effect.onExit(
      Effect.provideService(app, CurrentRequest, current),
      (exit) => Effect.sync(() => void record(current, statusOf(exit)))
    )
  }

  const traced = <E, R>(sample: Sampler, request: HttpServerRequest.HttpServerRequest, app: App<E, R>): App<E, R> => {
    const startedAt = performance.now()
    const caller = callerSpanOf(request.headers)
    const parent = caller === undefined ? undefined : externalSpanOf(caller)
    // The trace is sampled here, once. Not sampled: the request runs as it came, with no span at
    // all and tracing off (`RequestsUntraced`), so the spans libraries open below it cost what they
    // cost untraced.
    if (!sample(parent)) return measured(request, app)
    const method = methodLabel(request.method)
    if (metrics) adjustActiveRequests(1)
    // Named by its method until its route is known; the export names it by both (`Tracing.ts`).
    return sampled(Effect.flatMap(serverSpan(method, parent), (span) => {
      span.attribute("http.request.method", method)
      span.attribute("url.scheme", "http")
      span.attribute("url.path", pathOf(request.url))
      if (request.method !== method) span.attribute("http.request.method_original", request.method)
      const userAgent = request.headers["user-agent"]
      if (userAgent !== undefined) span.attribute("user_agent.original", userAgent)
      const current = new RequestRecord(request, clientAddress, startedAt, span)
      span.attribute("client.address", current.clientAddress.text)
      return Effect.onExit(
        Effect.withParentSpan(Effect.provideService(app, CurrentRequest, current), span),
        (exit) => {
          const status = statusOf(exit)
          const labels = record(current, status)
          if (labels.route !== unmatchedRoute) span.attribute("http.route", labels.route)
          span.attribute("http.response.status_code", status)
          if (status >= 500) span.attribute("error.type", String(status))
          return Effect.map(Clock.currentTimeNanos, (now) =>
            span.end(now, status >= 500 && Exit.isSuccess(exit) ? Exit.fail(new Error(`HTTP ${status}`)) : exit))
        }
      )
    }))
  }

  return <E, R>(request: HttpServerRequest.HttpServerRequest, app: App<E, R>): App<E, R> =>
    sample !== undefined
      ? traced(sample, request, app)
      : metrics || ended !== undefined
      ? measured(request, app)
      : plain(request, app)
}
