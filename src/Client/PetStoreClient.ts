import {
  FetchHttpClient,
  HttpApiClient,
  HttpClient,
  type HttpClientError,
  HttpClientRequest,
  type HttpClientResponse
} from "@effect/platform"
import { Chunk, Config, Context, Duration, Effect, Layer, Option, Redacted, Schedule, Stream } from "effect"
import { PetStoreApi } from "../Api.js"
import type { NewPet, Pet, PetStatus } from "../Domain/Pet.js"

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
  readonly retryBaseDelay?: Duration.DurationInput | undefined
  /** The longest `Retry-After` waited for; an answer asking for more is returned as it came (default 30 s). */
  readonly maxRetryAfter?: Duration.DurationInput | undefined
}

const transientStatuses = new Set([502, 503, 504])

class TransientStatus {
  readonly _tag = "TransientStatus"
  constructor(readonly response: HttpClientResponse.HttpClientResponse) {}
}

/** A `Retry-After` header's wait: delay-seconds or an HTTP date. */
const retryAfterOf = (response: HttpClientResponse.HttpClientResponse): Option.Option<Duration.Duration> => {
  const value = response.headers["retry-after"]?.trim()
  if (value === undefined || value === "") return Option.none()
  if (/^\d+$/.test(value)) return Option.some(Duration.seconds(Number(value)))
  const at = Date.parse(value)
  return Number.isNaN(at) ? Option.none() : Option.some(Duration.millis(Math.max(0, at - Date.now())))
}

/**
 * Retries what is safe to retry: a GET, or a POST that carries an idempotency key, after a
 * connection error or a 502, 503 or 504, with exponential backoff and jitter, or after the
 * answer's `Retry-After` when it gives one. The last answer is returned as it came when the
 * retries run out, or when it asks for a longer wait than `maxRetryAfter`.
 */
const retryTransient = (retries: number, baseDelay: Duration.DurationInput, maxRetryAfter: Duration.DurationInput) =>
(client: HttpClient.HttpClient) => {
  const schedule = Schedule.exponential(baseDelay).pipe(
    Schedule.jittered,
    Schedule.intersect(Schedule.recurs(retries)),
    Schedule.intersect(Schedule.identity<HttpClientError.HttpClientError | TransientStatus>()),
    Schedule.modifyDelay(([, error], delay) =>
      error._tag === "TransientStatus" ? Option.getOrElse(retryAfterOf(error.response), () => delay) : delay
    )
  )
  const waitsTooLong = (error: HttpClientError.HttpClientError | TransientStatus) =>
    error._tag === "TransientStatus" &&
    Option.exists(retryAfterOf(error.response), (wait) => Duration.greaterThan(wait, maxRetryAfter))
  const isTransient = (error: HttpClientError.HttpClientError | TransientStatus) =>
    (error._tag === "TransientStatus" && !waitsTooLong(error)) ||
    (error._tag === "RequestError" && error.reason === "Transport")
  return HttpClient.transform(client, (effect, request): Effect.Effect<HttpClientResponse.HttpClientResponse, HttpClientError.HttpClientError> => {
    const safe = request.method === "GET" || (request.method === "POST" && request.headers["idempotency-key"] !== undefined)
    if (!safe) return effect
    return effect.pipe(
      Effect.flatMap((response) =>
        transientStatuses.has(response.status) ? Effect.fail(new TransientStatus(response)) : Effect.succeed(response)
      ),
      Effect.retry({ schedule, while: isTransient }),
      Effect.catchIf(
        (error): error is TransientStatus => error._tag === "TransientStatus",
        (error) => Effect.succeed(error.response)
      )
    )
  })
}

const nextCursor = (link: string | undefined): Option.Option<string> => {
  const url = link === undefined ? undefined : /<([^>]+)>\s*;\s*rel="next"/.exec(link)?.[1]
  return Option.fromNullable(url === undefined ? null : new URL(url).searchParams.get("cursor"))
}

const make = (options: PetStoreClientOptions) =>
  Effect.gen(function*() {
    const baseUrl = "baseUrl" in options.target
      ? options.target.baseUrl
      : yield* Config.string(
        options.target.environment === "production" ? "PETSTORE_PRODUCTION_URL" : "PETSTORE_STAGING_URL"
      )
    const httpClient = (yield* HttpClient.HttpClient).pipe(
      HttpClient.mapRequest(HttpClientRequest.bearerToken(Redacted.value(options.apiKey))),
      retryTransient(options.retries ?? 3, options.retryBaseDelay ?? "100 millis", options.maxRetryAfter ?? "30 seconds")
    )
    const api = yield* HttpApiClient.makeWith(PetStoreApi, { httpClient, baseUrl: baseUrl.replace(/\/+$/, "") })
    let warnedOfSunset = false

    const listPage = (
      params: {
        readonly status?: PetStatus | undefined
        readonly limit?: number | undefined
        readonly cursor?: string | undefined
      } = {}
    ) =>
      Effect.map(api.pets.listPets({ urlParams: params, withResponse: true }), ([pets, response]) => ({
        pets,
        next: nextCursor(response.headers["link"])
      }))

    return {
      /** One page of animals, and the cursor of the next page when there is one. */
      listPets: listPage,
      /**
       * Every animal (with `status`, those with it), page after page, following the
       * `Link: rel="next"` header. Pages are fetched only as the stream is consumed.
       */
      listAll: (params: { readonly status?: PetStatus | undefined; readonly pageSize?: number | undefined } = {}) =>
        Stream.paginateChunkEffect(undefined as string | undefined, (cursor) =>
          Effect.map(
            listPage({ status: params.status, limit: params.pageSize, cursor }),
            ({ next, pets }): [Chunk.Chunk<Pet>, Option.Option<string | undefined>] => [Chunk.fromIterable(pets), next]
          )),
      /**
       * Adds an animal. With an idempotency key, a retry after a lost answer cannot add it twice,
       * and transient failures are retried.
       */
      createPet: (pet: NewPet, createOptions: { readonly idempotencyKey?: string | undefined } = {}) =>
        api.pets.createPet({
          payload: pet,
          headers: createOptions.idempotencyKey === undefined ? {} : { "idempotency-key": createOptions.idempotencyKey }
        }),
      /**
       * One animal by id.
       * @deprecated Removed on 5 December 2030: use `listPets` or `listAll` with `status`.
       */
      getPet: (petId: number) =>
        Effect.flatMap(api.pets.getPet({ path: { petId }, withResponse: true }), ([pet, response]) => {
          const sunset = response.headers["sunset"]
          if (warnedOfSunset || sunset === undefined) return Effect.succeed(pet)
          warnedOfSunset = true
          return Effect.as(
            Effect.logWarning(
              `GET /v1/pets/{petId} is deprecated and will be removed on ${sunset}; use listPets with status`
            ),
            pet
          )
        })
    }
  })

/**
 * A client of the Pet Store, derived from the same API definition as the server: payloads and
 * answers are checked by the same Schemas, and the interface's errors arrive typed in the error
 * channel (`BadRequest`, `Unauthorized`, `NotFound`, `Gone`, …) with their `code`, `message` and
 * `status`.
 */
export class PetStoreClient extends Context.Tag("petstore/PetStoreClient")<
  PetStoreClient,
  Effect.Effect.Success<ReturnType<typeof make>>
>() {
  /** A client over the given `HttpClient` (for tests, or another transport). */
  static readonly layerWithoutHttpClient = (options: PetStoreClientOptions) => Layer.effect(PetStoreClient, make(options))

  /** A client over `fetch`: works under Bun, Node.js and in browsers. */
  static readonly layer = (options: PetStoreClientOptions) =>
    PetStoreClient.layerWithoutHttpClient(options).pipe(Layer.provide(FetchHttpClient.layer))
}
