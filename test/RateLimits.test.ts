import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Fiber } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { TestClock } from "effect/testing"
import { RateLimiter } from "../src/Auth/RateLimiter.js"
import { parseTrustedProxies } from "../src/Request/ClientAddress.js"
import { answeredOrWaiting, createKey, makeTestServer, send } from "./support/TestServer.js"
import { waitForEffect } from "./support/WaitFor.js"

describe("the rate limit per API key (token bucket)", () => {
  it.effect("answers 429 rate_limited past the burst, with Retry-After and the RateLimit headers, until refilled", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey("busy")
      const other = (yield* createKey("calm")).key
      for (const remaining of [2, 1, 0]) {
        const response = yield* send("GET", "/v1/pets", { key })
        expect(response.status).toBe(200)
        expect(response.headers["ratelimit-policy"]).toBe(`"per-key";q=3;w=3`)
        expect(response.headers["ratelimit"]).toBe(`"per-key";r=${remaining};t=${3 - remaining}`)
      }
      const limited = yield* send("GET", "/v1/pets", { key })
      expect(limited.status).toBe(429)
      expect(limited.headers["retry-after"]).toBe("1")
      expect(limited.headers["ratelimit"]).toBe(`"per-key";r=0;t=3`)
      expect(limited.body).toEqual({
        code: "rate_limited",
        message: "This API key is over its request rate; retry after the Retry-After seconds",
        status: 429
      })
      expect((yield* send("GET", "/v1/pets", { key: other })).status).toBe(200)
      yield* TestClock.adjust("1 second")
      expect((yield* send("GET", "/v1/pets", { key })).status).toBe(200)
    }).pipe(Effect.provide(makeTestServer(undefined, { rateLimit: { perSecond: 1, burst: 3 } }))))
})

describe("failed authentications per client address", () => {
  it.effect("are slowed once half are spent, then answered 429; a valid key from the same address is still served", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const wrong = { authorization: "Bearer ps_test_guess" }
      // 6 allowed a minute: the first 3 failures answer at once.
      for (let i = 0; i < 3; i++) expect((yield* send("GET", "/v1/pets", { headers: wrong })).status).toBe(401)
      // The next ones wait 200 ms, then 400 ms, then 600 ms.
      for (const wait of [200, 400, 600]) {
        const attempt = yield* Effect.forkChild(send("GET", "/v1/pets", { headers: wrong }))
        yield* answeredOrWaiting(attempt, "2 seconds", "request")
        yield* TestClock.adjust(wait - 1)
        // Fixed: the answer must stay away for a while in real time, one tick short of its wait.
        yield* Effect.promise(() => Bun.sleep(50))
        expect(attempt.pollUnsafe(), `still waiting before ${wait} ms`).toBeUndefined()
        yield* TestClock.adjust(1)
        expect((yield* Fiber.join(attempt)).status).toBe(401)
      }
      const blocked = yield* send("GET", "/v1/pets", { headers: wrong })
      expect(blocked.status).toBe(429)
      expect(blocked.body).toMatchObject({ code: "rate_limited", status: 429 })
      expect(Number(blocked.headers["retry-after"])).toBeGreaterThan(0)
      expect((yield* send("GET", "/v1/pets", { key })).status).toBe(200)
      expect((yield* send("GET", "/v1/pets", {})).status).toBe(429)
      yield* TestClock.adjust("1 minute")
      expect((yield* send("GET", "/v1/pets", { headers: wrong })).status).toBe(401)
    }).pipe(Effect.provide(makeTestServer(undefined, { authFailuresPerMinute: 6 }))))

  it.effect("with workers, each counts its share: 6 a minute over 2 workers is 3 each, slowed from its third", () =>
    Effect.gen(function*() {
      const wrong = { authorization: "Bearer ps_test_guess" }
      for (let i = 0; i < 2; i++) {
        const attempt = yield* Effect.forkChild(send("GET", "/v1/pets", { headers: wrong }))
        yield* answeredOrWaiting(attempt, "2 seconds", "request")
        expect(attempt.pollUnsafe(), `failure ${i + 1} answered without waiting`).not.toBeUndefined()
      }
      const third = yield* Effect.forkChild(send("GET", "/v1/pets", { headers: wrong }))
      yield* answeredOrWaiting(third, "2 seconds", "request")
      expect(third.pollUnsafe()).toBeUndefined()
      yield* TestClock.adjust(200)
      expect((yield* Fiber.join(third)).status).toBe(401)
    }).pipe(Effect.provide(makeTestServer(undefined, { authFailuresPerMinute: 6 }, RateLimiter.InMemoryShare(2)))))
})

describe("failed authentications behind a trusted proxy", () => {
  const proxy = { trustedProxies: parseTrustedProxies("127.0.0.1, ::1").ranges, authFailuresPerMinute: 4 }
  const from = (client: string, headers: Record<string, string> = {}) => ({ "x-forwarded-for": client, ...headers })
  const wrong = { authorization: "Bearer ps_test_guess" }

  it.effect("count per client the proxy names: one client's failures refuse neither other clients nor valid keys", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const attacker = from("203.0.113.9", wrong)
      for (let i = 0; i < 4; i++) {
        const attempt = yield* Effect.forkChild(send("GET", "/v1/pets", { headers: attacker }))
        yield* answeredOrWaiting(attempt, "2 seconds", "request")
        yield* TestClock.adjust("2 seconds")
        expect((yield* Fiber.join(attempt)).status).toBe(401)
      }
      expect((yield* send("GET", "/v1/pets", { headers: attacker })).status).toBe(429)
      // Through the same proxy, another client's mistake is its own first failure.
      expect((yield* send("GET", "/v1/pets", { headers: from("198.51.100.7", wrong) })).status).toBe(401)
      expect((yield* send("GET", "/v1/pets", { key, headers: from("198.51.100.7") })).status).toBe(200)
      expect((yield* send("GET", "/v1/pets", { key, headers: from("203.0.113.9") })).status).toBe(200)
    }).pipe(Effect.provide(makeTestServer(undefined, proxy))))

  it.effect("group IPv6 clients by their /64", () =>
    Effect.gen(function*() {
      for (let i = 0; i < 4; i++) {
        const attempt = yield* Effect.forkChild(
          send("GET", "/v1/pets", { headers: from(`2001:db8:1:2::${i + 1}`, wrong) })
        )
        yield* answeredOrWaiting(attempt, "2 seconds", "request")
        yield* TestClock.adjust("2 seconds")
        expect((yield* Fiber.join(attempt)).status).toBe(401)
      }
      expect((yield* send("GET", "/v1/pets", { headers: from("2001:db8:1:2:ffff::9", wrong) })).status).toBe(429)
      expect((yield* send("GET", "/v1/pets", { headers: from("2001:db8:1:3::1", wrong) })).status).toBe(401)
    }).pipe(Effect.provide(makeTestServer(undefined, proxy))))

  it.effect("ignore forwarding headers from a peer that is not trusted", () =>
    Effect.gen(function*() {
      for (let i = 0; i < 4; i++) {
        const attempt = yield* Effect.forkChild(send("GET", "/v1/pets", { headers: from(`203.0.113.${i}`, wrong) }))
        yield* answeredOrWaiting(attempt, "2 seconds", "request")
        yield* TestClock.adjust("2 seconds")
        expect((yield* Fiber.join(attempt)).status).toBe(401)
      }
      expect((yield* send("GET", "/v1/pets", { headers: from("198.51.100.7", wrong) })).status).toBe(429)
    }).pipe(Effect.provide(makeTestServer(undefined, { authFailuresPerMinute: 4 }))))

  it.effect("write the client's address in the request's log line", () => {
    const lines: Array<string> = []
    return Effect.gen(function*() {
      yield* send("GET", "/v1/pets", { headers: from("203.0.113.9", wrong) })
      yield* send("GET", "/livez", { headers: from("2001:db8::7") })
      const logged = () => lines.join("").trim().split("\n").filter((line) => line !== "")
      yield* waitForEffect(Effect.sync(() => logged().length >= 2), { what: "the two requests' log lines" })
      const clients = logged().map((line) => JSON.parse(line).annotations.client)
      expect(clients).toEqual(["203.0.113.9", "2001:db8::7"])
    }).pipe(Effect.provide(makeTestServer(undefined, proxy, undefined, undefined, (chunk) => lines.push(chunk))))
  })
})

describe("refusals in the metrics", () => {
  const count = (series: string) => {
    const line = PrometheusMetrics.formatUnsafe(Context.empty()).split("\n").find((l) => l.startsWith(series + " "))
    return line === undefined ? 0 : Number(line.slice(series.length + 1))
  }
  const series = [
    `petstore_rate_limited_requests_total{policy="per-key"}`,
    `petstore_rate_limited_requests_total{policy="failed-authentication"}`,
    `petstore_failed_authentications_total{reason="invalid_api_key"}`,
    `petstore_failed_authentications_total{reason="missing_api_key"}`
  ]

  it.live("count each 429 by policy and each 401 by reason", () =>
    Effect.gen(function*() {
      const before = series.map(count)
      const { key } = yield* createKey()
      expect((yield* send("GET", "/v1/pets", { key })).status).toBe(200)
      expect((yield* send("GET", "/v1/pets", { key })).status).toBe(429)
      expect((yield* send("GET", "/v1/pets", { headers: { authorization: "Bearer ps_test_guess" } })).status).toBe(401)
      expect((yield* send("GET", "/v1/pets", {})).status).toBe(401)
      expect((yield* send("GET", "/v1/pets", {})).status).toBe(429)
      expect(series.map(count).map((after, i) => after - before[i]!)).toEqual([1, 1, 1, 1])
    }).pipe(
      Effect.provide(makeTestServer(undefined, { authFailuresPerMinute: 2, rateLimit: { perSecond: 0.001, burst: 1 } }))
    ))
})
