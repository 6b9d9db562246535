import { Config, Context, Data, Duration, Effect, Layer, Option, Redacted, Schedule, Stream } from "effect"
import { FetchHttpClient, HttpClient, HttpClientError, HttpClientRequest, HttpClientResponse } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { PetStoreApi } from "../Api.js"
import type { ListPetsParams } from "../Api/Pets.js"
import type { NewPet, PetStatus } from "../Domain/Pet.js"

/** Which deployment a client talks to; `production` and `staging` take their address from configuration. */
export type Target =
  | { readonly environment: "production" | "staging" }
  | { readonly baseUrl: string }

export interface PetStoreClientOptions {
  readonly target: Target
  readonly apiKey: Redacted.Redacted
  /** Attempts after the first for transient failures (default 3). */
  readonly retries?: number | undefined
  /** First retry delay; doubles each attempt, with jitter (default 100 ms). */
  readonly retryBaseDelay?: Duration.Input | undefined
  /** The longest `Retry-After` waited for; an answer asking for more is returned as it came (default 30 s). */
  readonly maxRetryAfter?: Duration.Input | undefined
}

type Response = HttpClientResponse.HttpClientResponse

class TransientStatus extends Data.TaggedClass("TransientStatus")<{ readonly response: Response }> {}

const retryAfterOf = (response: Response): Option.Option<Duration.Duration> => {
  const value = response.headers["retry-after"]?.trim() ?? ""
  if (/^\d+$/.test(value)) return Option.some(Duration.seconds(Number(value)))
  const at = Date.parse(value)
  return Number.isNaN(at) ? Option.none() : Option.some(Duration.millis(Math.max(0, at - Date.now())))
}

/**
 * Retries a GET, or a POST with an idempotency key, after a connection error, 502, 503 or 504, with backoff or the
 * answer's `Retry-After` (`HttpClient.retryTransient` retries any method, 408, 429 and 500, with no bound on a wait).
 */
const retryTransient =
  ({ maxRetryAfter = "30 seconds", retries = 3, retryBaseDelay = "100 millis" }: PetStoreClientOptions) =>
  (client: HttpClient.HttpClient): HttpClient.HttpClient => {
    const schedule = Schedule.exponential(retryBaseDelay).pipe(
      Schedule.jittered,
      Schedule.setInputType<HttpClientError.HttpClientError | TransientStatus>(),
      Schedule.modifyDelay(({ duration, input }) =>
        Effect.succeed(
          input._tag === "TransientStatus" ? Option.getOrElse(retryAfterOf(input.response), () => duration) : duration
        )
      )
    )
    const longestWait = Duration.fromInputUnsafe(maxRetryAfter)
    return HttpClient.transform(
      client,
      (effect, request) =>
        request.method === "GET" || (request.method === "POST" && request.headers["idempotency-key"] !== undefined)
          ? effect.pipe(
            Effect.filterOrFail(
              (response) => ![502, 503, 504].includes(response.status),
              (response) => new TransientStatus({ response })
            ),
            Effect.retry({
              schedule,
              times: retries,
              while: (error) =>
                error._tag === "TransientStatus"
                  ? !Option.exists(retryAfterOf(error.response), (wait) => Duration.isGreaterThan(wait, longestWait))
                  : error.reason._tag === "TransportError"
            }),
            Effect.catchTag("TransientStatus", (error) => Effect.succeed(error.response))
          )
          : effect
    )
  }

const nextCursor = (link: string | undefined): Option.Option<string> => {
  const url = link === undefined ? undefined : /<([^>]+)>\s*;\s*rel="next"/.exec(link)?.[1]
  return Option.fromNullishOr(url === undefined ? null : new URL(url).searchParams.get("cursor"))
}

type PageQuery = { readonly [K in keyof typeof ListPetsParams.Type]?: (typeof ListPetsParams.Type)[K] | undefined }

/** The query without its undefined values: the API's optional keys are absent or set, never undefined. */
const defined = (query: PageQuery) =>
  Object.fromEntries(Object.entries(query).filter(([, value]) => value !== undefined)) as typeof ListPetsParams.Type

const make = (options: PetStoreClientOptions) =>
  Effect.gen(function*() {
    const baseUrl = "baseUrl" in options.target
      ? options.target.baseUrl
      : yield* Config.String(
        options.target.environment === "production" ? "PETSTORE_PRODUCTION_URL" : "PETSTORE_STAGING_URL"
      )
    const httpClient = (yield* HttpClient.HttpClient).pipe(
      HttpClient.mapRequest(HttpClientRequest.bearerToken(Redacted.value(options.apiKey))),
      retryTransient(options)
    )
    const api = yield* HttpApiClient.makeWith(PetStoreApi, { httpClient, baseUrl: baseUrl.replace(/\/+$/, "") })
    let warnedOfSunset = false

    const listPage = (params: PageQuery = {}) =>
      Effect.map(
        api.pets.listPets({ query: defined(params), responseMode: "decoded-and-response" }),
        ([pets, response]) => ({ pets, next: nextCursor(response.headers["link"]) })
      )

    // Every endpoint as HttpApiClient derives it, by group (`client.pets.getPet(…)`), and the conveniences.
    return {
      ...api,
      /** One page of animals, and the cursor of the next page when there is one. */
      listPets: listPage,
      /** Every animal (with `status`, those with it), following `Link: rel="next"` as the stream is consumed. */
      listAll: (params: { readonly status?: PetStatus | undefined; readonly pageSize?: number | undefined } = {}) =>
        Stream.paginate(undefined as string | undefined, (cursor) =>
          Effect.map(listPage({ status: params.status, limit: params.pageSize, cursor }), ({ next, pets }) =>
            [pets, next] as const)),
      /** Adds an animal; with an idempotency key, transient failures are retried and a retry cannot add it twice. */
      createPet: (pet: NewPet, createOptions: { readonly idempotencyKey?: string | undefined } = {}) =>
        api.pets.createPet({
          payload: pet,
          headers: createOptions.idempotencyKey === undefined ? {} : { "idempotency-key": createOptions.idempotencyKey }
        }),
      /** @deprecated Removed on 5 December 2030: use `listPets` or `listAll` with `status`. */
      getPet: (petId: number) =>
        api.pets.getPet({ params: { petId }, responseMode: "decoded-and-response" }).pipe(
          Effect.tap(([, { headers }]) => {
            if (warnedOfSunset || headers["sunset"] === undefined) {
              return Effect.void
            }
            warnedOfSunset = true
            return Effect.logWarning(
              `GET /v1/pets/{petId} is deprecated and will be removed on ${headers["sunset"]}; use listPets with status`
            )
          }),
          Effect.map(([pet]) =>
            pet
          )
        )
    }
  })

/** A client derived from the server's API definition: the same Schemas, and the interface's errors typed. */
export class PetStoreClient extends Context.Service<PetStoreClient, Effect.Success<ReturnType<typeof make>>>()(
  "petstore/PetStoreClient"
) {
  /** A client over the given `HttpClient` (for tests, or another transport). */
  static readonly layerWithoutHttpClient = (options: PetStoreClientOptions) =>
    Layer.effect(PetStoreClient, make(options))

  /** A client over `fetch`: works under Bun, Node.js and in browsers. */
  static readonly layer = (options: PetStoreClientOptions) =>
    PetStoreClient.layerWithoutHttpClient(options).pipe(Layer.provide(FetchHttpClient.layer))
}
