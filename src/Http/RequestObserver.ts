import { Cause, Context, Effect, Exit, Option, References, Tracer } from "effect"
import { HttpServerError, type HttpServerRequest, type HttpServerResponse } from "effect/http"
import { adjustActiveRequests } from "../Observability/Metrics.js"
import type { Sampler } from "../Observability/Sampler.js"
import { callerSpanOf } from "../Observability/TraceContext.js"
import { untimed } from "../Observability/Tracing.js"
import type { ClientAddress } from "../Request/ClientAddress.js"
import { CurrentRequest, RequestRecord } from "../Request/CurrentRequest.js"
import type { App } from "./InFlightRequests.js"
import { pathOf } from "./Routes.js"
import { makeRouteLabels, methodLabel, unmatchedRoute } from "./RouteTemplates.js"

/** Whether a request ended because its client went away (the server marks that interruption). */
export const isClientAbort = (cause: Cause.Cause<unknown>): boolean =>
  cause.reasons.some((reason) =>
    Cause.isInterruptReason(reason) &&
    Context.getOrUndefined(Cause.reasonAnnotations(reason), HttpServerError.ClientAbort) === true
  )

/** The status a request ended with: its response's, 499 (nginx's) when its client went away, else 500. */
const statusOf = (exit: Exit.Exit<HttpServerResponse.HttpServerResponse, unknown>): number =>
  Exit.isSuccess(exit) ? exit.value.status : isClientAbort(exit.cause) ? 499 : 500

/**
 * Per request: record, duration, in-flight gauge, log line and, if sampled, server span (`sample` first). Not
 * `HttpMiddleware.tracer`: it follows B3, refuses a later `traceparent`, spans every request, writes `:petId` routes.
 */
export const makeRequestObserver = ({ clientAddress, ended, metrics, tracing }: {
  readonly clientAddress: (request: HttpServerRequest.HttpServerRequest) => ClientAddress
  readonly metrics: boolean
  readonly tracing: { readonly sample: Sampler; readonly tracer: Tracer.Tracer } | undefined
  readonly ended?: ((record: RequestRecord, route: string, status: number) => void) | undefined
}) => {
  const routeOf = makeRouteLabels(metrics)

  /** The request's server span, when the sampler chooses it, named by its method until its route is known. */
  const serverSpanOf = (request: HttpServerRequest.HttpServerRequest): Tracer.Span | undefined => {
    if (tracing === undefined) return undefined
    const caller = callerSpanOf(request.headers)
    if (!tracing.sample(caller)) return undefined
    const method = methodLabel(request.method)
    const span = tracing.tracer.span({
      name: method,
      parent: Option.fromUndefinedOr(caller),
      annotations: Context.empty(),
      links: [],
      startTime: untimed,
      kind: "server",
      root: caller === undefined,
      // The sampler's choice holds even when the caller's flag said no.
      sampled: true
    })
    span.attribute("http.request.method", method)
    span.attribute("url.scheme", "http")
    span.attribute("url.path", pathOf(request.url))
    if (request.method !== method) span.attribute("http.request.method_original", request.method)
    const userAgent = request.headers["user-agent"]
    if (userAgent !== undefined) span.attribute("user_agent.original", userAgent)
    return span
  }

  /** The request's labels, log line and server span, once it is answered (its route noted by then, if one matched). */
  const answered = (current: RequestRecord, exit: Exit.Exit<HttpServerResponse.HttpServerResponse, unknown>) => {
    const status = statusOf(exit)
    const labels = routeOf(current.request.method, current.route)
    if (metrics) {
      adjustActiveRequests(-1)
      labels.recordDuration(status, (performance.now() - current.startedAt) / 1000)
    }
    ended?.(current, labels.route, status)
    const span = current.trace
    if (span === undefined || tracing === undefined) return
    span.attribute("client.address", current.clientAddress.text)
    if (labels.route !== unmatchedRoute) span.attribute("http.route", labels.route)
    span.attribute("http.response.status_code", status)
    if (status >= 500) span.attribute("error.type", String(status))
    span.end(
      untimed,
      status >= 500 && Exit.isSuccess(exit) ? Exit.fail(new Error(`HTTP ${status}`)) : exit
    )
  }

  const observed = metrics || ended !== undefined || tracing !== undefined
  return <E, R>(request: HttpServerRequest.HttpServerRequest, app: App<E, R>): App<E, R> => {
    const startedAt = performance.now()
    const span = serverSpanOf(request)
    const current = new RequestRecord(request, clientAddress, startedAt, span)
    // One change of the fiber's context, which the runtime caches anew for each.
    const served = span === undefined
      ? Effect.provideService(app, CurrentRequest, current)
      : Effect.updateContext(app, (context: Context.Context<R>) =>
        Context.add(
          Context.add(Context.add(context, CurrentRequest, current), Tracer.ParentSpan, span),
          References.TracerEnabled,
          true
        ))
    if (!observed) return served
    if (metrics) adjustActiveRequests(1)
    // However the request ends, its client gone included.
    return Effect.onExitPrimitive(served, (exit) => {
      answered(current, exit)
      return undefined
    })
  }
}
