import { type HttpApp, HttpServerRequest } from "@effect/platform"
import { Clock, Effect, Exit, type Tracer } from "effect"
import { activeRequests } from "../Observability/Metrics.js"
import { callerSpanOf, externalSpanOf } from "../Observability/TraceContext.js"
import type { ClientAddress } from "../Request/ClientAddress.js"
import { statusOf } from "./RequestStatus.js"
import { pathOf } from "./Routes.js"
import { makeRouteLabels, type RouteLabels, unmatchedRoute } from "./RouteTemplates.js"

/** The server span of each request whose trace is sampled, for its log line. */
const serverSpans = new WeakMap<HttpServerRequest.HttpServerRequest, Tracer.Span>()

export const serverSpanOf = (request: HttpServerRequest.HttpServerRequest): Tracer.Span | undefined =>
  serverSpans.get(request)

/**
 * Around every request, when metrics or traces are on: the request-duration histogram by method,
 * route template and status, the gauge of requests in flight, and, with tracing, the request's
 * server span (continuing the caller's `traceparent`), where the tracer samples the trace. A
 * sampled request's span gets the HTTP semantic-convention attributes and is the parent of every
 * span below; any other request runs with no span at all, so none below it is recorded.
 * Never a header: the Authorization header stays out of every span.
 */
export const makeRequestObserver = (options: {
  readonly metrics: boolean
  readonly tracing: boolean
  readonly clientAddress: (request: HttpServerRequest.HttpServerRequest) => ClientAddress
}) => {
  const routeOf = makeRouteLabels()
  const record = (labels: RouteLabels, start: number, status: number) => {
    if (!options.metrics) return
    activeRequests.unsafeModify(-1, [])
    labels.durationFor(status).unsafeUpdate((performance.now() - start) / 1000, [])
  }

  const measured = <E, R>(app: HttpApp.Default<E, R>) =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const start = performance.now()
      const labels = routeOf(request.method, request.url)
      activeRequests.unsafeModify(1, [])
      return Effect.onExit(app, (exit) => {
        record(labels, start, statusOf(exit))
        return Effect.void
      })
    })

  const traced = <E, R>(app: HttpApp.Default<E, R>) =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const start = performance.now()
      const labels = routeOf(request.method, request.url)
      if (options.metrics) activeRequests.unsafeModify(1, [])
      const caller = callerSpanOf(request.headers)
      return Effect.flatMap(
        Effect.makeSpan(labels.spanName, {
          kind: "server",
          // The trace is sampled here, once: with the caller's span as parent, or as a new trace.
          ...(caller === undefined ? { root: true } : { parent: externalSpanOf(caller) }),
          captureStackTrace: false
        }),
        (span) => {
          // Not sampled: no parent is set, and the tracer records no span without one.
          if (!span.sampled) {
            return Effect.onExit(app, (exit) => {
              record(labels, start, statusOf(exit))
              return Effect.void
            })
          }
          span.attribute("http.request.method", labels.method)
          span.attribute("url.scheme", "http")
          span.attribute("url.path", pathOf(request.url))
          if (request.method !== labels.method) span.attribute("http.request.method_original", request.method)
          const userAgent = request.headers["user-agent"]
          if (userAgent !== undefined) span.attribute("user_agent.original", userAgent)
          span.attribute("client.address", options.clientAddress(request).text)
          serverSpans.set(request, span)
          return Effect.onExit(Effect.withParentSpan(app, span), (exit) => {
            const status = statusOf(exit)
            record(labels, start, status)
            // Set last: the router names the route in its own syntax (`:petId`) on the same span.
            if (labels.route !== unmatchedRoute) span.attribute("http.route", labels.route)
            span.attribute("http.response.status_code", status)
            if (status >= 500) span.attribute("error.type", String(status))
            return Effect.map(Clock.currentTimeNanos, (now) =>
              span.end(now, status >= 500 && Exit.isSuccess(exit) ? Exit.fail(new Error(`HTTP ${status}`)) : exit))
          })
        }
      )
    })

  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> =>
    options.tracing ? traced(app) : options.metrics ? measured(app) : app
}
