import { HttpApiBuilder, HttpApiScalar, HttpMiddleware, OpenApi } from "@effect/platform"
import { Effect, Layer } from "effect"
import { PetStoreApi } from "./Api.js"
import { AppConfig } from "./AppConfig.js"
import { AuthenticationLive } from "./Auth/Http.js"
import { HealthHttpLive } from "./Health/Http.js"
import { InFlightRequests } from "./Http/InFlightRequests.js"
import { ErrorResponses } from "./Http/ErrorResponses.js"
import { requestLog } from "./Http/RequestLog.js"
import { PetsHttpLive, SunsetPolicyLive } from "./Pets/Http.js"

/** The API definition with this deployment's servers, for the OpenAPI document and the docs page. */
const ApiLive = Layer.unwrapEffect(
  Effect.map(AppConfig, ({ servers }) =>
    HttpApiBuilder.api(
      PetStoreApi.annotate(OpenApi.Servers, [
        { url: servers.production, description: "Production" },
        { url: servers.staging, description: "Staging" }
      ])
    )
  )
).pipe(
  Layer.provide([PetsHttpLive, HealthHttpLive]),
  Layer.provide([AuthenticationLive, SunsetPolicyLive])
)

/**
 * The whole HTTP service: the API, its OpenAPI document and docs page, error bodies for every
 * failure, the request log, and the count of requests in flight for a graceful stop. Needs an
 * `HttpServer`, the stores, `InFlightRequests` and `AppConfig`.
 */
export const HttpLive = Layer.unwrapEffect(
  Effect.map(InFlightRequests, ({ middleware }) =>
    HttpApiBuilder.serve((app) => requestLog(middleware(app)))
  )
).pipe(
  Layer.provide(HttpApiScalar.layer({ path: "/docs" })),
  Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/v1/openapi.json" })),
  Layer.provide(ErrorResponses),
  Layer.provide(ApiLive),
  // Spans are exported nowhere; tracing every request would cost time for nothing.
  HttpMiddleware.withTracerDisabledWhen(() => true)
)
