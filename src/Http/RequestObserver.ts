import type { HttpServerResponse } from "@effect/platform"
import { Clock, Effect, Exit } from "effect"
import { activeRequests } from "../Observability/Metrics.js"
import type { Sampler } from "../Observability/Sampler.js"
import { callerSpanOf, externalSpanOf } from "../Observability/TraceContext.js"
import type { RequestState } from "../Request/CurrentRequest.js"
import { statusOf } from "./RequestStatus.js"
import { pathOf } from "./Routes.js"
import { makeRouteLabels, type RouteLabels, unmatchedRoute } from "./RouteTemplates.js"

/**
 * Around every request, when metrics or traces are on or `ended` is given: the request-duration
 * histogram by method, route template and status, the gauge of requests in flight, and, with
 * tracing, the trace's sampling, then, when sampled, the request's server span (continuing the
 * caller's `traceparent`). A sampled request's span gets the HTTP semantic-convention attributes, is
 * noted on the request's record and is the parent of every span below; any other request runs
 * with no span at all, so none below it is recorded. Never a header: the Authorization header
 * stays out of every span. `ended` is called with the request's status once it is answered (the
 * request log), in the same step as the metrics.
 */
export const makeRequestObserver = (options: {
  readonly metrics: boolean
  /** With tracing: whether a trace is recorded, asked once per request before any span is made. */
  readonly sample: Sampler | undefined
  readonly ended?: ((state: RequestState, status: number) => void) | undefined
}) => {
  const { ended, metrics, sample } = options
  const routeOf = makeRouteLabels()
  const record = (state: RequestState, labels: RouteLabels | undefined, status: number) => {
    if (labels !== undefined) {
      activeRequests.unsafeModify(-1, [])
      labels.durationFor(status).unsafeUpdate((performance.now() - state.startedAt) / 1000, [])
    }
    ended?.(state, status)
  }

  const measured = <E, R>(state: RequestState, app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) => {
    let labels: RouteLabels | undefined
    if (metrics) {
      labels = routeOf(state.request.method, state.request.url)
      activeRequests.unsafeModify(1, [])
    }
    // The platform runs the app uninterruptibly, so one of these always runs.
    return Effect.matchCauseEffect(app, {
      onSuccess: (response) => {
        record(state, labels, response.status)
        return Effect.succeed(response)
      },
      onFailure: (cause) => {
        record(state, labels, statusOf(Exit.failCause(cause)))
        return Effect.failCause(cause)
      }
    })
  }

  const traced = <E, R>(
    sample: Sampler,
    state: RequestState,
    app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
  ) => {
    const { request } = state
    const caller = callerSpanOf(request.headers)
    const parent = caller === undefined ? undefined : externalSpanOf(caller)
    // The trace is sampled here, once. Not sampled: the request runs with no span at all, and the
    // tracer records none without a parent.
    if (!sample(parent)) return measured(state, app)
    const labels = routeOf(request.method, request.url)
    const counted = metrics ? labels : undefined
    if (metrics) activeRequests.unsafeModify(1, [])
    return Effect.flatMap(
      Effect.makeSpan(labels.spanName, {
        kind: "server",
        ...(parent === undefined ? { root: true } : { parent }),
        captureStackTrace: false
      }),
      (span) => {
        span.attribute("http.request.method", labels.method)
        span.attribute("url.scheme", "http")
        span.attribute("url.path", pathOf(request.url))
        if (request.method !== labels.method) span.attribute("http.request.method_original", request.method)
        const userAgent = request.headers["user-agent"]
        if (userAgent !== undefined) span.attribute("user_agent.original", userAgent)
        span.attribute("client.address", state.clientAddress.text)
        state.span = span
        return Effect.onExit(Effect.withParentSpan(app, span), (exit) => {
          const status = statusOf(exit)
          record(state, counted, status)
          // Set last: the router names the route in its own syntax (`:petId`) on the same span.
          if (labels.route !== unmatchedRoute) span.attribute("http.route", labels.route)
          span.attribute("http.response.status_code", status)
          if (status >= 500) span.attribute("error.type", String(status))
          return Effect.map(Clock.currentTimeNanos, (now) =>
            span.end(now, status >= 500 && Exit.isSuccess(exit) ? Exit.fail(new Error(`HTTP ${status}`)) : exit))
        })
      }
    )
  }

  return <E, R>(
    state: RequestState,
    app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R> =>
    sample !== undefined ? traced(sample, state, app) : metrics || ended !== undefined ? measured(state, app) : app
}
