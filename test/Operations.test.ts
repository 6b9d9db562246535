import { describe, expect, it } from "@effect/vitest"
import { Deferred, type Duration, Effect, Fiber, Layer, type Redacted } from "effect"
import { HttpApi } from "effect/http-api"
import { TestClock } from "effect/testing"
import { readFileSync, writeFileSync } from "node:fs"
import { PetStoreApi } from "../src/Api.js"
import { InFlightRequests } from "../src/Http/InFlightRequests.js"
import { PetRepository, type Readiness } from "../src/Pets/PetRepository.js"
import { answeredOrWaiting, createKey, makeTestServer, publicBaseUrl, send, TestServer } from "./support/TestServer.js"
import { waitForEffect } from "./support/WaitFor.js"

const storeWhoseReadinessIs = (readiness: Readiness) =>
  Layer.effect(
    PetRepository,
    Effect.map(PetRepository, (pets) => ({ ...pets, readiness: Effect.succeed(readiness) }))
  ).pipe(Layer.provide(PetRepository.InMemory))

const fixture = new URL("./fixtures/openapi.json", import.meta.url)

/** The methods the API definition's endpoints declare. */
const apiMethods = (() => {
  const methods = new Set<string>()
  HttpApi.reflect(PetStoreApi, { onGroup: () => {}, onEndpoint: ({ endpoint }) => void methods.add(endpoint.method) })
  return [...methods].sort()
})()

describe("served beside the API", () => {
  it.effect("GET /v1/openapi.json is the checked-in document: any change to it is deliberate", () =>
    Effect.gen(function*() {
      const response = yield* send("GET", "/v1/openapi.json")
      expect(response.status).toBe(200)
      // UPDATE_OPENAPI_FIXTURE=1 rewrites the copy after a deliberate change.
      if (process.env.UPDATE_OPENAPI_FIXTURE === "1") {
        writeFileSync(fixture, JSON.stringify(response.body, null, 2) + "\n")
      }
      expect(response.body).toEqual(JSON.parse(readFileSync(fixture, "utf8")))
    }).pipe(Effect.provide(TestServer)))

  it.effect("the document lists this instance first, then the other environment, bearer security, deprecation, and no internal decode error", () =>
    Effect.gen(function*() {
      const { body: spec } = yield* send("GET", "/v1/openapi.json")
      expect(spec.servers).toEqual([
        { url: publicBaseUrl, description: "This instance (staging)" },
        { url: "https://petstore.example.com", description: "Production" }
      ])
      expect(spec.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "bearer" })
      expect(spec.paths["/v1/pets/{petId}"].get.deprecated).toBe(true)
      expect(JSON.stringify(spec)).not.toContain("HttpApiDecodeError")
      expect(spec.paths["/v1/pets"].post.security).toEqual([{ bearer: [] }])
      expect(spec.paths["/livez"].get.security).toEqual([])
    }).pipe(Effect.provide(TestServer)))

  it.effect("GET /docs is an interactive page that works offline", () =>
    Effect.gen(function*() {
      const page = yield* send("GET", "/docs")
      expect(page.status).toBe(200)
      expect(page.headers["content-type"]).toContain("text/html")
      expect(page.text).toContain(`id="api-reference"`)
      // The viewer's script is inlined: no CDN is needed.
      expect(page.text).not.toMatch(/<script[^>]+src=/)
    }).pipe(Effect.provide(TestServer)))

  it.effect("GET /livez and GET /readyz answer without a key", () =>
    Effect.gen(function*() {
      expect(yield* send("GET", "/livez")).toMatchObject({ status: 200, body: { status: "ok" } })
      expect(yield* send("GET", "/readyz")).toMatchObject({ status: 200, body: { status: "ok", database: "ready" } })
    }).pipe(Effect.provide(TestServer)))

  for (const database of ["unavailable", "read_only"] as const) {
    it.effect(`GET /readyz stays 200 naming a fault of the database every instance shares: ${database}`, () =>
      Effect.gen(function*() {
        const response = yield* send("GET", "/readyz")
        expect(response.status).toBe(200)
        expect(response.body).toEqual({ status: "ok", database })
      }).pipe(Effect.provide(makeTestServer(storeWhoseReadinessIs(database)))))
  }

  it.effect("GET /readyz answers 503 when this instance cannot use its own store (its SQLite file gone or damaged)", () =>
    Effect.gen(function*() {
      const response = yield* send("GET", "/readyz")
      expect(response.status).toBe(503)
      expect(response.body).toEqual({
        code: "database_unavailable",
        message:
          "database: this instance's SQLite file was deleted, replaced or is damaged; restart it on the right file",
        status: 503
      })
    }).pipe(Effect.provide(makeTestServer(storeWhoseReadinessIs("unusable")))))

  it.effect("every response is marked never to be cached nor sniffed", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      for (
        const response of [
          yield* send("GET", "/v1/pets", { key }),
          yield* send("GET", "/v1/pets"),
          yield* send("GET", "/v1/nowhere"),
          yield* send("GET", "/livez")
        ]
      ) {
        expect(response.headers["cache-control"]).toBe("no-store")
        expect(response.headers["x-content-type-options"]).toBe("nosniff")
      }
    }).pipe(Effect.provide(TestServer)))

  it.effect("CORS is off unless CORS_ORIGINS lists origins", () =>
    Effect.gen(function*() {
      const response = yield* send("GET", "/v1/pets", { headers: { origin: "https://app.example" } })
      expect(response.headers["access-control-allow-origin"]).toBeUndefined()
      const preflight = yield* send("OPTIONS", "/v1/pets", {
        headers: { origin: "https://app.example", "access-control-request-method": "POST" }
      })
      expect(preflight.headers["access-control-allow-origin"]).toBeUndefined()
    }).pipe(Effect.provide(TestServer)))

  it.effect("with CORS_ORIGINS, the listed origins may call the API from a browser", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const preflight = yield* send("OPTIONS", "/v1/pets", {
        headers: { origin: "https://app.example", "access-control-request-method": "POST" }
      })
      expect(preflight.status).toBe(204)
      expect(preflight.headers["access-control-allow-origin"]).toBe("https://app.example")
      // Answered by the CORS middleware itself, and still with every response's headers.
      expect(preflight.headers["x-request-id"]).toBeDefined()
      expect(preflight.headers["cache-control"]).toBe("no-store")
      expect(preflight.headers["access-control-allow-headers"]).toContain("authorization")
      // Every method an endpoint of the API declares, and no other: an endpoint added is allowed too.
      expect(preflight.headers["access-control-allow-methods"]!.split(/\s*,\s*/).sort()).toEqual(apiMethods)
      const allowed = yield* send("GET", "/v1/pets", { key, headers: { origin: "https://app.example" } })
      expect(allowed.headers["access-control-allow-origin"]).toBe("https://app.example")
      expect(allowed.headers["access-control-expose-headers"]).toContain("link")
      const refused = yield* send("GET", "/v1/pets", { headers: { origin: "https://app.example" } })
      expect(refused.status).toBe(401)
      expect(refused.headers["access-control-allow-origin"]).toBe("https://app.example")
      const other = yield* send("GET", "/v1/pets", { key, headers: { origin: "https://evil.example" } })
      expect(other.headers["access-control-allow-origin"]).toBeUndefined()
    }).pipe(
      Effect.provide(makeTestServer(undefined, { corsOrigins: ["https://app.example", "https://admin.example"] }))
    ))

  it.effect("with CORS_ORIGINS, a page's script can read every header a client acts on", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const origin = { origin: "https://app.example" }
      const responses = [
        yield* send("POST", "/v1/pets", { key, headers: origin, body: JSON.stringify({ name: "Rex", categoryId: 3 }) }),
        yield* send("GET", "/v1/pets/1", { key, headers: origin }),
        yield* send("GET", "/v1/pets", { key, headers: origin }),
        yield* send("GET", "/v1/pets", { key, headers: origin }),
        yield* send("GET", "/v1/pets", { headers: origin })
      ]
      expect(responses.map((response) => response.status)).toEqual([201, 200, 200, 429, 401])
      const exposed = responses[0]!.headers["access-control-expose-headers"]!.split(/\s*,\s*/)
      expect(exposed).toEqual(expect.arrayContaining([
        "retry-after",
        "ratelimit",
        "ratelimit-policy",
        "location",
        "x-request-id",
        "deprecation",
        "sunset",
        "link"
      ]))
      // A browser shows the page's script the CORS-safelisted headers and the exposed ones; the
      // rest here are for the browser itself (or say nothing a client acts on).
      const safelisted = [
        "cache-control",
        "content-language",
        "content-length",
        "content-type",
        "expires",
        "last-modified",
        "pragma"
      ]
      const forTheBrowser = ["date", "connection", "keep-alive", "vary", "x-content-type-options"]
      for (const response of responses) {
        expect(response.headers["access-control-expose-headers"]).toBe(exposed.join(","))
        const sent = Object.keys(response.headers).filter((name) =>
          !name.startsWith("access-control-") && !safelisted.includes(name) && !forTheBrowser.includes(name)
        )
        for (const name of sent) expect(exposed, `${response.status}: ${name}`).toContain(name)
      }
    }).pipe(Effect.provide(makeTestServer(undefined, {
      corsOrigins: ["https://app.example"],
      rateLimit: { perSecond: 1, burst: 3 }
    }))))

  it.effect("a stop: /readyz fails at once, every other request is served with Connection: close for the grace, then refused", () => {
    const lines: Array<string> = []
    return Effect.gen(function*() {
      const { key } = yield* createKey()
      const listenerClosed = yield* Deferred.make<void>()
      const stop = yield* Effect.forkChild(
        Effect.flatMap(
          InFlightRequests,
          (inFlight) =>
            inFlight.stop({
              grace: "5 seconds",
              drain: "10 seconds",
              closeListener: Deferred.succeed(listenerClosed, undefined)
            })
        ),
        { startImmediately: true }
      )
      // Its grace is asleep on the test clock: nothing below moves before the test says so.
      yield* answeredOrWaiting(stop, "5 seconds")

      const ready = yield* send("GET", "/readyz")
      expect(ready.status).toBe(503)
      expect(ready.body).toEqual({
        code: "shutting_down",
        message: "The instance is shutting down; retry",
        status: 503
      })
      expect(ready.headers["connection"]).toBe("close")
      for (const served of [yield* send("GET", "/livez"), yield* send("GET", "/v1/pets", { key })]) {
        expect(served.status).toBe(200)
        expect(served.headers["connection"]).toBe("close")
      }

      yield* TestClock.adjust("4999 millis")
      expect(yield* Deferred.isDone(listenerClosed)).toBe(false)
      expect((yield* send("GET", "/v1/pets", { key })).status).toBe(200)

      yield* TestClock.adjust("1 millis")
      // With nothing in flight, the stop ends once the listener is closed: no wait for the drain.
      yield* Fiber.join(stop)
      expect(yield* Deferred.isDone(listenerClosed)).toBe(true)
      // What still comes on a connection left open: refused, and the connection closed.
      const refused = yield* send("GET", "/livez", { headers: { "x-request-id": "late-1" } })
      expect(refused.status).toBe(503)
      expect(refused.headers["connection"]).toBe("close")
      expect(refused.headers["retry-after"]).toBe("1")
      expect(refused.headers["x-request-id"]).toBe("late-1")
      expect(refused.body).toEqual({
        code: "shutting_down",
        message: "The instance is shutting down; retry",
        status: 503
      })
      // A path no route serves is refused by nothing: it is answered 404 as always.
      expect((yield* send("GET", "/nowhere")).status).toBe(404)
      // Each answer carries its route's label, the stop's 503s included. The log's lines are
      // written in batches, within 50 ms.
      yield* waitForEffect(Effect.sync(() => lines.join("").includes(`"path":"/nowhere"`)), {
        what: "the last request's log line"
      })
      const logged = lines.join("").trim().split("\n").map((line) => JSON.parse(line).annotations)
      expect(logged.filter(({ status }) => status === 503).map(({ route }) => route)).toEqual(["/readyz", "/livez"])
      expect(logged.at(-1)).toMatchObject({ path: "/nowhere", route: "unmatched", status: 404 })
    }).pipe(Effect.provide(makeTestServer(undefined, {}, undefined, {}, (chunk) => lines.push(chunk))))
  })

  /** A create whose body is still coming, in flight on the server until `finish` sends the rest. */
  const createInFlight = (key: Redacted.Redacted) =>
    Effect.gen(function*() {
      const encoder = new TextEncoder()
      let finish = () => {}
      const body = new ReadableStream<Uint8Array>({
        start: (controller) => {
          controller.enqueue(encoder.encode(`{"name":"Rex",`))
          finish = () => {
            controller.enqueue(encoder.encode(`"categoryId":3}`))
            controller.close()
          }
        }
      })
      const create = yield* Effect.forkChild(send("POST", "/v1/pets", { key, body }), { startImmediately: true })
      // The request has reached the server once it sleeps on its deadline.
      yield* answeredOrWaiting(create, "5 seconds")
      return { create, finish: () => finish() }
    })

  const stopNow = (drain: Duration.Input) =>
    Effect.forkChild(
      Effect.flatMap(InFlightRequests, (inFlight) => inFlight.stop({ grace: 0, drain, closeListener: Effect.void })),
      { startImmediately: true }
    )

  it.effect("a stop waits for the requests in flight when the listener closes, and ends as soon as none is left", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const { create, finish } = yield* createInFlight(key)
      const stop = yield* stopNow("3 seconds")
      yield* TestClock.adjust("2999 millis")
      expect(stop.pollUnsafe()).toBeUndefined()
      finish()
      const answer = yield* Fiber.join(create)
      expect(answer.status).toBe(201)
      // Begun before the stop, answered after it: its connection closes too.
      expect(answer.headers["connection"]).toBe("close")
      yield* Fiber.join(stop)
    }).pipe(Effect.provide(TestServer)))

  it.effect("a stop ends at the drain's bound with a request still in flight", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const { finish } = yield* createInFlight(key)
      const stop = yield* stopNow("3 seconds")
      yield* TestClock.adjust("3 seconds")
      yield* Fiber.join(stop)
      finish()
    }).pipe(Effect.provide(TestServer)))

  it.effect("every response carries X-Request-Id: the caller's when sane, else a new one", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const echoed = yield* send("GET", "/v1/pets", { key, headers: { "x-request-id": "abc-123" } })
      expect(echoed.headers["x-request-id"]).toBe("abc-123")
      const replaced = yield* send("GET", "/v1/nowhere", { headers: { "x-request-id": "bad id with spaces" } })
      expect(replaced.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/)
      const unauthorized = yield* send("GET", "/v1/pets")
      expect(unauthorized.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/)
    }).pipe(Effect.provide(TestServer)))
})
