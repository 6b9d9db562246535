import { HttpApiBuilder, type HttpApp, HttpMiddleware, HttpServerRequest, OpenApi } from "@effect/platform"
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
import { enterRequest } from "../Request/CurrentRequest.js"
import { ApiResponses } from "./ApiResponses.js"
import { DocsLive } from "./Docs.js"
import { InFlightRequests } from "./InFlightRequests.js"
import { ObservedAuthentication, ObservedPetRepository } from "./ObservedServices.js"
import { withDeadline } from "./RequestDeadline.js"
import { makeRequestLog, RequestLines } from "./RequestLog.js"
import { makeRequestObserver } from "./RequestObserver.js"
import { ExactRoutes } from "./Routes.js"

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

/** CORS for the listed browser origins; off when `CORS_ORIGINS` lists none. */
const CorsLive = Layer.unwrapEffect(
  Effect.map(AppConfig, ({ corsOrigins }) =>
    corsOrigins.length === 0 ? Layer.empty : HttpApiBuilder.middlewareCors({
      allowedOrigins: corsOrigins,
      allowedMethods: ["GET", "POST"],
      allowedHeaders: ["authorization", "content-type", "idempotency-key", "x-request-id"],
      exposedHeaders: ["link", "location", "deprecation", "sunset", "www-authenticate", "x-request-id"],
      maxAge: 600
    })
  )
)

/** The API's handlers, its OpenAPI document and docs page, error bodies and response headers. */
export const AppLive = Layer.mergeAll(
  DocsLive,
  // Built after ApiResponses, so it wraps it and its headers reach error responses too.
  CorsLive.pipe(Layer.provide(ApiResponses))
).pipe(Layer.provideMerge(ApiLive))

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
  return (app: HttpApp.Default): HttpApp.Default<never, HttpServerRequest.HttpServerRequest> => {
    const served = middleware(deadline(app))
    return enterRequest(clientAddress, (state) => observe(state, served))
  }
})

/**
 * The whole HTTP service. Needs an `HttpServer`, the stores, `InFlightRequests`, `RequestLines`,
 * `AppConfig` and `ObservabilityConfig`.
 */
export const HttpLive = Layer.unwrapEffect(Effect.map(serverMiddleware, HttpApiBuilder.serve)).pipe(
  Layer.provide(AppLive),
  Layer.provide(ExactRoutes),
  // The platform's request tracer stays off: the request observer makes the server span, and
  // only when traces are exported, so tracing off costs nothing.
  HttpMiddleware.withTracerDisabledWhen(() => true),
  Layer.provide(TracingLive)
)
