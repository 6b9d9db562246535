import { HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { BunHttpServer } from "@effect/platform-bun"
import { Chunk, Clock, Duration, Effect, type Fiber, Layer, Redacted, Stream, TestClock } from "effect"
import { PetStoreApi } from "../../src/Api.js"
import { AppConfig } from "../../src/Config/AppConfig.js"
import { ApiKeys } from "../../src/Auth/ApiKeys.js"
import { RateLimiter } from "../../src/Auth/RateLimiter.js"
import { HttpLive } from "../../src/Http/Server.js"
import { InFlightRequests } from "../../src/Http/InFlightRequests.js"
import { RequestLines } from "../../src/Http/RequestLog.js"
import { ObservabilityConfig } from "../../src/Observability/ObservabilityConfig.js"
import { Cursors } from "../../src/Pets/Cursors.js"
import { PetRepository } from "../../src/Pets/PetRepository.js"

export const publicBaseUrl = "http://petstore.test"

/** The whole HTTP service on a fresh test server, with the in-memory stores unless told otherwise. */
export const makeTestServer = (
  pets: Layer.Layer<PetRepository> = PetRepository.InMemory,
  config: Partial<AppConfig["Type"]> = {},
  limiter: Layer.Layer<RateLimiter> = RateLimiter.InMemory,
  observability: Partial<ObservabilityConfig["Type"]> = {},
  logLines: (chunk: string) => void = () => {}
) =>
  HttpLive.pipe(
    Layer.provideMerge(BunHttpServer.layerTest),
    Layer.provideMerge(Layer.mergeAll(pets, ApiKeys.InMemory, Cursors.InMemory, limiter)),
    Layer.provideMerge(
      Layer.mergeAll(
        // The deadline's timer runs on real time while these tests move the TestClock: a slowed
        // answer waiting on the TestClock must not meet it on a loaded machine.
        AppConfig.make({ publicBaseUrl, requestTimeout: Duration.minutes(5), ...config }),
        InFlightRequests.layer,
        RequestLines.layer(logLines),
        ObservabilityConfig.make(observability)
      )
    )
  )

export const TestServer = makeTestServer()

/** A new API key on the test server. */
export const createKey = (name = "test client") =>
  Effect.flatMap(ApiKeys, (keys) => keys.create(name))

/** The client derived from the API definition, sending `key` as its bearer credential. */
export const clientWith = (key: Redacted.Redacted | string | undefined) =>
  HttpApiClient.make(PetStoreApi, {
    transformClient: key === undefined
      ? undefined
      : HttpClient.mapRequest(HttpClientRequest.bearerToken(typeof key === "string" ? key : Redacted.value(key)))
  })

/** A client holding a fresh valid key. */
export const authorizedClient = Effect.flatMap(createKey(), ({ key }) => clientWith(key))

/** A request written by hand, for what a derived client would never send; answers status, headers and body. */
export const send = (
  method: "GET" | "POST" | "PUT" | "DELETE" | "PATCH" | "OPTIONS",
  path: string,
  options: {
    readonly key?: Redacted.Redacted | undefined
    readonly headers?: Record<string, string> | undefined
    readonly body?: string | Uint8Array | ReadableStream<Uint8Array> | undefined
  } = {}
) =>
  Effect.gen(function*() {
    const http = yield* HttpClient.HttpClient
    let request = HttpClientRequest.make(method)(path).pipe(HttpClientRequest.setHeaders(options.headers ?? {}))
    if (options.key !== undefined) request = HttpClientRequest.bearerToken(request, Redacted.value(options.key))
    if (typeof options.body === "string") {
      request = HttpClientRequest.bodyText(request, options.body, options.headers?.["content-type"] ?? "application/json")
    } else if (options.body instanceof Uint8Array) {
      request = HttpClientRequest.bodyUint8Array(request, options.body, options.headers?.["content-type"])
    } else if (options.body !== undefined) {
      request = HttpClientRequest.bodyStream(request, Stream.fromReadableStream(() => options.body as ReadableStream<Uint8Array>, (e) => e), {
        contentType: options.headers?.["content-type"] ?? "application/json"
      })
    }
    const response = yield* http.execute(request)
    const text = yield* response.text
    const isJson = response.headers["content-type"]?.startsWith("application/json") ?? false
    return { status: response.status, headers: response.headers, text, body: isJson ? JSON.parse(text) : undefined }
  }).pipe(Effect.scoped)

/**
 * Waits, in real time, until `fiber` (a request sent on the test server) has its answer, or until
 * something sleeps on the TestClock to end within `within` (a slowed answer waiting). Moving the
 * clock before the request has reached its sleep would leave it sleeping for good, however long
 * the request takes to get there on a loaded machine.
 */
export const answeredOrAsleep = (fiber: Fiber.RuntimeFiber<unknown, unknown>, within: Duration.DurationInput = "5 seconds") =>
  Effect.gen(function*() {
    const horizon = Duration.toMillis(within)
    for (const givenUpAt = Date.now() + 10_000; Date.now() < givenUpAt;) {
      if (fiber.unsafePoll() !== null) return
      const now = yield* Clock.currentTimeMillis
      if (Chunk.some(yield* TestClock.sleeps(), (end) => end <= now + horizon)) return
      yield* Effect.promise(() => Bun.sleep(5))
    }
  })
