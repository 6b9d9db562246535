import { HttpApiBuilder, type HttpApp, HttpMiddleware, HttpServer, OpenApi } from "@effect/platform"
import { Effect, Layer, LogLevel, Option } from "effect"
import { PetStoreApi } from "../Api.js"
import { AuthenticationLive } from "../Auth/AuthenticationMiddleware.js"
import { AppConfig } from "../Config/AppConfig.js"
import { HealthHttpLive } from "../Health/Http.js"
import { ObservabilityConfig } from "../Observability/ObservabilityConfig.js"
import { makeSampler } from "../Observability/Sampler.js"
import { TracingLive } from "../Observability/Tracing.js"
import { PetsHttpLive, SunsetPolicyLive } from "../Pets/Http.js"
import { makeClientAddress } from "../Request/ClientAddress.js"
import { enterRequest, withCurrentRequest } from "../Request/CurrentRequest.js"
import { ApiResponses, routeNotFound } from "./ApiResponses.js"
import { DocsLive } from "./Docs.js"
import { InFlightRequests } from "./InFlightRequests.js"
import { ObservedAuthentication, ObservedPetRepository } from "./ObservedServices.js"
import { withDeadline } from "./RequestDeadline.js"
import { makeRequestLog, RequestLines } from "./RequestLog.js"
import { makeRequestObserver } from "./RequestObserver.js"
import { withResponseHeaders } from "./ResponseHeaders.js"
import { ExactRoutes, isCanonicalPath, pathOf } from "./Routes.js"

/** The API definition with this deployment's servers, for the OpenAPI document and the docs page. */
const ApiLive = Layer.unwrapEffect(
  Effect.map(AppConfig, ({ servers }) =>
    HttpApiBuilder.api(PetStoreApi.annotate(OpenApi.Servers, servers))
  )
).pipe(
  Layer.provide([PetsHttpLive, HealthHttpLive]),
  Layer.provide([ObservedAuthentication, ObservedPetRepository]),
  Layer.provide([AuthenticationLive, SunsetPolicyLive])
)

/** The API's handlers, its OpenAPI document and docs page, and the error bodies HttpApi cannot write. */
export const AppLive = Layer.mergeAll(DocsLive, ApiResponses).pipe(Layer.provideMerge(ApiLive))

/**
 * Around HttpApi's app (its router, its middlewares and its encoding of the errors it declares),
 * before the server sends the response: a path spelled otherwise than a route declares it is 404
 * before the router sees it, and every response gets the headers it leaves with
 * (`ResponseHeaders.ts`) and, when `CORS_ORIGINS` lists origins, CORS. Here rather than among
 * HttpApi's middlewares, whose failures HttpApi encodes after them, and rather than in the server
 * middleware, which sees a response the server has already sent.
 */
export const answered = Effect.map(AppConfig, ({ corsOrigins }) => {
  const cors = corsOrigins.length === 0 ? undefined : HttpMiddleware.cors({
    allowedOrigins: corsOrigins,
    allowedMethods: ["GET", "POST"],
    allowedHeaders: ["authorization", "content-type", "idempotency-key", "x-request-id"],
    exposedHeaders: ["link", "location", "deprecation", "sunset", "www-authenticate", "x-request-id"],
    maxAge: 600
  })
  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> => {
    // CORS inside the headers: its preflight answers (which it writes itself) leave with them too.
    const served = cors === undefined ? app : cors(app)
    const notFound = (url: string) => {
      const response = Effect.succeed(routeNotFound(pathOf(url)))
      return cors === undefined ? response : cors(response)
    }
    return withCurrentRequest((state) => {
      const { url } = state.request
      return Effect.map(isCanonicalPath(url) ? served : notFound(url), withResponseHeaders(state))
    })
  }
})

/**
 * Where every request enters, in this order: its record (`Request/CurrentRequest.ts`: its id, the
 * headers noted for its response, its server span, its log line's fields) made once for
 * everything below to read; its metrics, server span and log line; the count of requests in
 * flight (for a graceful stop); then its deadline.
 */
export const serverMiddleware = Effect.gen(function*() {
  const { middleware } = yield* InFlightRequests
  const { logLevel, requestTimeout, trustedProxies } = yield* AppConfig
  const { metrics, tracing } = yield* ObservabilityConfig
  const clientAddress = makeClientAddress(trustedProxies)
  const observe = makeRequestObserver({
    metrics: metrics._tag === "Some",
    sample: Option.match(tracing, { onNone: () => undefined, onSome: ({ ratio, sampler }) => makeSampler(sampler, ratio) }),
    ended: LogLevel.greaterThan(logLevel, LogLevel.Info) ? undefined : makeRequestLog((yield* RequestLines).add)
  })
  const deadline = withDeadline(requestTimeout)
  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> => {
    const served = middleware(deadline(app))
    return enterRequest(clientAddress, (state) => observe(state, served))
  }
})

/**
 * The whole HTTP service: HttpApi's app, answered as above, served under the server middleware
 * (what `HttpApiBuilder.serve` does, with the app wrapped first). Needs an `HttpServer`, the
 * stores, `InFlightRequests`, `RequestLines`, `AppConfig` and `ObservabilityConfig`.
 */
export const HttpLive = Layer.unwrapEffect(
  Effect.gen(function*() {
    const app = yield* HttpApiBuilder.httpApp
    return HttpServer.serve((yield* answered)(app), yield* serverMiddleware)
  })
).pipe(
  Layer.provide([HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer]),
  Layer.provide(AppLive),
  Layer.provide(ExactRoutes),
  // The platform's request tracer stays off: the request observer makes the server span, and
  // only when traces are exported, so tracing off costs nothing.
  HttpMiddleware.withTracerDisabledWhen(() => true),
  Layer.provide(TracingLive)
)
