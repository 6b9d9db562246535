import { Clock, Context, Duration, Effect, type Fiber, Layer, Redacted, Stream } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { PetStoreApi } from "../../src/Api.js"
import { ApiKeys } from "../../src/Auth/ApiKeys.js"
import { RateLimiter } from "../../src/Auth/RateLimiter.js"
import { AppConfig } from "../../src/Config/AppConfig.js"
import * as BunServer from "../../src/Http/BunServer.js"
import { InFlightRequests } from "../../src/Http/InFlightRequests.js"
import { RequestLines } from "../../src/Http/RequestLog.js"
import { HttpLive } from "../../src/Http/Server.js"
import { ObservabilityConfig } from "../../src/Observability/ObservabilityConfig.js"
import { Cursors } from "../../src/Pets/Cursors.js"
import { PetRepository } from "../../src/Pets/PetRepository.js"
import { CurrentRequest } from "../../src/Request/CurrentRequest.js"
import { waitForEffect } from "./WaitFor.js"

export const publicBaseUrl = "http://petstore.test"

/** When each sleep on the test server's clock that has not ended yet ends (its clock's time), and whose it is. */
const pendingSleeps = new Map<object, { readonly end: number; readonly sleeper: Sleeper }>()

/** A request being served (a failed authentication slowed), or the service itself (the deadline's sweeper, a stop). */
type Sleeper = "request" | "service"

/**
 * The clock the test runs on (a TestClock), with its sleeps noted in `pendingSleeps`: the test
 * clock tells no one what sleeps on it, and `answeredOrWaiting` needs to know.
 */
const NotedSleeps = Layer.effectContext(Effect.withFiber((fiber) => {
  const clock = fiber.getRef(Clock.Clock)
  // The same clock (a TestClock keeps its `adjust`), but for its sleeps.
  const noted: Clock.Clock = Object.assign(Object.create(clock), {
    sleep: (duration: Duration.Duration) =>
      Effect.withFiber((fiber) => {
        const entry = {}
        const sleeper = fiber.getRef(CurrentRequest) === undefined ? "service" : "request"
        pendingSleeps.set(entry, { end: clock.currentTimeMillisUnsafe() + Duration.toMillis(duration), sleeper })
        return Effect.ensuring(clock.sleep(duration), Effect.sync(() => pendingSleeps.delete(entry)))
      })
  })
  return Effect.succeed(Context.make(Clock.Clock, noted))
}))

/** The whole HTTP service on a fresh test server, with the in-memory stores unless told otherwise. */
export const makeTestServer = (
  pets: Layer.Layer<PetRepository> = PetRepository.InMemory,
  config: Partial<AppConfig["Service"]> = {},
  limiter: Layer.Layer<RateLimiter> = RateLimiter.InMemory,
  observability: Partial<ObservabilityConfig["Service"]> = {},
  logLines: (chunk: string) => void = () => {}
) =>
  HttpLive.pipe(
    Layer.provideMerge(BunServer.layerTest),
    Layer.provideMerge(Layer.mergeAll(pets, ApiKeys.InMemory, Cursors.InMemory, limiter)),
    Layer.provideMerge(
      Layer.mergeAll(
        AppConfig.make({ publicBaseUrl, ...config }),
        InFlightRequests.layer,
        RequestLines.layer(logLines),
        ObservabilityConfig.make(observability)
      )
    ),
    Layer.provideMerge(NotedSleeps)
  )

export const TestServer = makeTestServer()

/** A new API key on the test server. */
export const createKey = (name = "test client") => ApiKeys.use((keys) => keys.create(name))

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
  method: "GET" | "HEAD" | "POST" | "PUT" | "DELETE" | "PATCH" | "OPTIONS",
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
      request = HttpClientRequest.bodyText(
        request,
        options.body,
        options.headers?.["content-type"] ?? "application/json"
      )
    } else if (options.body instanceof Uint8Array) {
      request = HttpClientRequest.bodyUint8Array(request, options.body, options.headers?.["content-type"])
    } else if (options.body !== undefined) {
      const body = options.body
      request = HttpClientRequest.bodyStream(
        request,
        Stream.fromReadableStream({ evaluate: () => body, onError: (error) => error }),
        { contentType: options.headers?.["content-type"] ?? "application/json" }
      )
    }
    const response = yield* http.execute(request)
    const text = yield* response.text
    const isJson = response.headers["content-type"]?.startsWith("application/json") ?? false
    return { status: response.status, headers: response.headers, text, body: isJson ? JSON.parse(text) : undefined }
  })

/**
 * Waits, in real time, until `fiber` (a request sent on the test server) has its answer, or until `sleeper` sleeps on
 * the test clock to end within `within`: a request (a slowed answer, 2 s at most, short of every deadline) or the
 * service (the deadline's sweeper, a stop's grace). Moving the clock before the sleep has begun would leave it
 * sleeping for good, however long it takes to get there on a loaded machine.
 */
export const answeredOrWaiting = (
  fiber: Fiber.Fiber<unknown, unknown>,
  within: Duration.Input = "2 seconds",
  sleeper: Sleeper = "service"
) => {
  const horizon = Duration.toMillis(Duration.fromInputUnsafe(within))
  return waitForEffect(
    Effect.map(
      Clock.currentTimeMillis,
      (now) =>
        fiber.pollUnsafe() !== undefined ||
        [...pendingSleeps.values()].some((sleep) => sleep.sleeper === sleeper && sleep.end <= now + horizon)
    ),
    { what: `the request answered, or the ${sleeper} asleep on the test clock to wake within ${within}`, interval: 5 }
  ).pipe(Effect.asVoid)
}
