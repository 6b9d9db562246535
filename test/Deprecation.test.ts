import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { createKey, publicBaseUrl, send, TestServer } from "./support/TestServer.js"

const sunset = Date.parse("2030-12-05T00:00:00Z")

const expectDeprecationHeaders = (headers: Record<string, string>) => {
  expect(headers["deprecation"]).toBe(`@${Date.parse("2026-01-01T00:00:00Z") / 1000}`)
  expect(headers["sunset"]).toBe("Thu, 05 Dec 2030 00:00:00 GMT")
  expect(headers["link"]).toBe(`<${publicBaseUrl}/docs#tag/pets/get/v1/pets>; rel="deprecation"; type="text/html"`)
}

describe("getPet is deprecated", () => {
  it.effect("every response of it carries Deprecation, Sunset and a Link to its replacement", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.parse("2027-06-01T00:00:00Z"))
      const { key } = yield* createKey()
      yield* send("POST", "/v1/pets", { key, body: `{"name":"Rex","categoryId":1}` })
      for (
        const [path, withKey, status] of [
          ["/v1/pets/1", true, 200],
          ["/v1/pets/2", true, 404],
          ["/v1/pets/x", true, 400],
          ["/v1/pets/1", false, 401]
        ] as const
      ) {
        const response = yield* send("GET", path, { key: withKey ? key : undefined })
        expect(response.status, path).toBe(status)
        expectDeprecationHeaders(response.headers)
      }
      // The replacement carries none of them.
      const list = yield* send("GET", "/v1/pets", { key })
      expect(list.headers["deprecation"]).toBeUndefined()
    }).pipe(Effect.provide(TestServer)))

  it.effect("from the sunset on it answers 410 endpoint_removed", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      yield* send("POST", "/v1/pets", { key, body: `{"name":"Rex","categoryId":1}` })
      yield* TestClock.setTime(sunset - 1)
      expect((yield* send("GET", "/v1/pets/1", { key })).status).toBe(200)
      yield* TestClock.setTime(sunset)
      const removed = yield* send("GET", "/v1/pets/1", { key })
      expect(removed.status).toBe(410)
      expectDeprecationHeaders(removed.headers)
      expect(removed.body).toEqual({
        code: "endpoint_removed",
        message:
          "GET /v1/pets/{petId} was removed on Thu, 05 Dec 2030 00:00:00 GMT; use GET /v1/pets with the status filter",
        status: 410
      })
    }).pipe(Effect.provide(TestServer)))
})
