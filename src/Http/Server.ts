import { Context, Effect, Layer, LogLevel, Option, Tracer } from "effect"
import { HttpMiddleware, HttpRouter, HttpServer, HttpServerRequest } from "effect/http"
import { HttpApiBuilder, OpenApi } from "effect/http-api"
import { PetStoreApi } from "../Api.js"
import { AuthenticationLive } from "../Auth/AuthenticationMiddleware.js"
import { AppConfig } from "../Config/AppConfig.js"
import { HealthHttpLive } from "../Health/Http.js"
import { ObservabilityConfig } from "../Observability/ObservabilityConfig.js"
import { makeSampler } from "../Observability/Sampler.js"
import { TracingLive } from "../Observability/Tracing.js"
import { PetsHttpLive, SunsetPolicyLive } from "../Pets/Http.js"
import { ObservedPetRepository } from "../Pets/PetRepositoryObserved.js"
import { makeClientAddress } from "../Request/ClientAddress.js"
import { CurrentRequest } from "../Request/CurrentRequest.js"
import { makeFailureAnswers, routeNotFound, SchemaErrorsLive, withResponseHeaders } from "./ApiResponses.js"
import { DocsLive } from "./Docs.js"
import { type App, InFlightRequests } from "./InFlightRequests.js"
import { makeDeadline } from "./RequestDeadline.js"
import { makeRequestLog, RequestLines } from "./RequestLog.js"
import { makeRequestObserver } from "./RequestObserver.js"
import { ExactRoutes, isCanonicalPath, pathOf, routeMethods } from "./Routes.js"

/** On every route: the matched route noted on the request's record for its labels, then the stop's refusal. */
const RouteNoted = HttpRouter.middleware(
  InFlightRequests.useSync(({ refusingWhenClosed }) => <E, R>(handler: App<E, R>) => {
    const refusing = refusingWhenClosed(handler)
    return Effect.withFiber((fiber) => {
      const current = fiber.getRef(CurrentRequest)
      if (current !== undefined) current.route = Context.getUnsafe(fiber.context, HttpRouter.RouteContext).route
      return refusing
    })
  })
).layer

/** The API's routes (its document listing this deployment's servers) and docs, with their middleware. */
export const AppLive = Layer.unwrap(
  AppConfig.useSync(({ servers }) => {
    const api = PetStoreApi.annotate(OpenApi.Servers, servers)
    return Layer.mergeAll(HttpApiBuilder.layer(api), DocsLive(api))
  })
).pipe(
  Layer.provide(RouteNoted),
  Layer.provide([PetsHttpLive, HealthHttpLive]),
  Layer.provide(ObservedPetRepository),
  Layer.provide([AuthenticationLive, SunsetPolicyLive, SchemaErrorsLive]),
  // What HttpApi asks of a platform for files and ETags, which no route here uses.
  Layer.provide(HttpServer.layerServices)
)

/** The response headers the API's document declares: every one a client acts on. */
const documentedHeaders = () =>
  Object.values(OpenApi.fromApi(PetStoreApi).paths).flatMap((item) =>
    routeMethods.flatMap((method) =>
      Object.values(item[method.toLowerCase() as OpenApi.OpenAPISpecMethodName]?.responses ?? {})
    )
  ).flatMap((response) => Object.keys(response.headers ?? {}).map((name) => name.toLowerCase()))

/** Around the router: a path spelled otherwise than declared is 404; the Error body, every response's headers, CORS. */
export const answered = AppConfig.useSync(({ corsOrigins }) => {
  const cors = corsOrigins.length === 0 ? undefined : HttpMiddleware.cors({
    allowedOrigins: corsOrigins,
    allowedMethods: routeMethods,
    allowedHeaders: ["authorization", "content-type", "idempotency-key", "x-request-id"],
    // A browser hides the others from the page's script.
    exposedHeaders: [...new Set(documentedHeaders())],
    maxAge: 600
  })
  const failureAnswers = makeFailureAnswers()
  return <E, R>(app: App<E, R>): App<unknown, R | HttpServerRequest.HttpServerRequest> =>
    CurrentRequest.use((current) => {
      if (current === undefined) return Effect.die("a request served outside the server middleware")
      const { url } = current.request
      const inner = isCanonicalPath(url)
        ? Effect.catchCause(app, (cause) => failureAnswers(cause, current))
        : Effect.succeed(routeNotFound(pathOf(url)))
      return withResponseHeaders(current, cors === undefined ? inner : cors(inner))
    })
})

/** Where every request enters: its record, metrics, span and log line; the count in flight; then its deadline. */
export const serverMiddleware = Effect.gen(function*() {
  const { middleware } = yield* InFlightRequests
  const { logLevel, requestTimeout, trustedProxies } = yield* AppConfig
  const { metrics, tracing } = yield* ObservabilityConfig
  const tracer = yield* Tracer.Tracer
  const observe = makeRequestObserver({
    clientAddress: makeClientAddress(trustedProxies),
    metrics: Option.isSome(metrics),
    tracing: Option.isNone(tracing)
      ? undefined
      : { sample: makeSampler(tracing.value.sampler, tracing.value.ratio), tracer },
    ended: LogLevel.isGreaterThan(logLevel, "Info") ? undefined : makeRequestLog((yield* RequestLines).add)
  })
  const deadline = yield* makeDeadline(requestTimeout)
  return <E, R>(app: App<E, R>): App<E, R | HttpServerRequest.HttpServerRequest> => {
    const served = middleware(deadline(app))
    return HttpServerRequest.HttpServerRequest.use((request) => observe(request, served))
  }
})

/** The whole HTTP service on `server`, built last: listening before its app, it would answer its clients 503. */
export const serveOn = <A, E, R>(server: Layer.Layer<A, E, R>) =>
  Layer.unwrap(
    Effect.gen(function*() {
      const router = yield* HttpRouter.HttpRouter
      const app = (yield* answered)(router.asHttpEffect())
      return HttpServer.serve((yield* serverMiddleware)(app)).pipe(
        // Kept in the output: the stop closes the server's listener (`BunServer.Listener`).
        Layer.provideMerge(server)
      )
    })
  ).pipe(
    // To the server's requests alone: a handler's layer context would turn a sampled request's tracing off again.
    Layer.provide(TracingLive),
    Layer.provide(Layer.provideMerge(AppLive, HttpRouter.layer)),
    Layer.provide(ExactRoutes),
    // The request observer makes the server span, and only when traces are exported.
    Layer.provide(Layer.succeed(HttpMiddleware.TracerDisabledWhen, () => true))
  )

/** The whole HTTP service on the `HttpServer` it is given (the tests' server, a benchmark's handler). */
export const HttpLive = serveOn(Layer.empty)
