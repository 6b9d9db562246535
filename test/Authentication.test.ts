import { describe, expect, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { ApiKeys } from "../src/Auth/ApiKeys.js"
import { clientWith, createKey, send, TestServer } from "./support/TestServer.js"

const missing = {
  code: "missing_api_key",
  message: "Authorization: an API key is required, as \"Bearer <API key>\"",
  status: 401
}

describe("authentication", () => {
  it.effect("every /v1 operation refuses a request without a key: 401 missing_api_key and a challenge", () =>
    Effect.gen(function*() {
      for (
        const [method, path] of [["GET", "/v1/pets"], ["POST", "/v1/pets"], ["GET", "/v1/pets/1"]] as const
      ) {
        const response = yield* send(method, path, {
          body: method === "POST" ? `{"name":"Rex","categoryId":1}` : undefined
        })
        expect(response.status, path).toBe(401)
        expect(response.headers["www-authenticate"]).toBe(`Bearer realm="petstore"`)
        expect(response.headers["content-type"]).toBe("application/json")
        expect(response.body).toEqual(missing)
      }
    }).pipe(Effect.provide(TestServer)))

  it.effect("a malformed, unknown or revoked key: 401 invalid_api_key with error=\"invalid_token\"", () =>
    Effect.gen(function*() {
      const { key, record } = yield* createKey()
      yield* Effect.flatMap(ApiKeys, (keys) => keys.revoke(record.id))
      for (
        const [authorization, message] of [
          ["Basic dXNlcjpwYXNz", "Authorization: must be \"Bearer <API key>\""],
          ["Bearer", "Authorization: must be \"Bearer <API key>\""],
          ["Bearer ps_test_unknown", "Authorization: the API key is unknown or revoked"],
          [`Bearer ${Redacted.value(key)}`, "Authorization: the API key is unknown or revoked"]
        ]
      ) {
        const response = yield* send("GET", "/v1/pets", { headers: { authorization: authorization! } })
        expect(response.status, authorization).toBe(401)
        expect(response.headers["www-authenticate"]).toBe(`Bearer realm="petstore", error="invalid_token"`)
        expect(response.body).toEqual({ code: "invalid_api_key", message, status: 401 })
      }
    }).pipe(Effect.provide(TestServer)))

  it.effect("the scheme is matched case-insensitively", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      for (const scheme of ["Bearer", "bearer", "BEARER", "bEaReR"]) {
        const response = yield* send("GET", "/v1/pets", {
          headers: { authorization: `${scheme} ${Redacted.value(key)}` }
        })
        expect(response.status, scheme).toBe(200)
      }
    }).pipe(Effect.provide(TestServer)))

  it.effect("runs before decoding: a caller without a key learns nothing about its request", () =>
    Effect.gen(function*() {
      for (
        const [method, path, body] of [
          ["POST", "/v1/pets", `{"name":`],
          ["POST", "/v1/pets", "x".repeat(70_000)],
          ["GET", "/v1/pets?limit=5000", undefined],
          ["GET", "/v1/pets/not-a-number", undefined]
        ] as const
      ) {
        const response = yield* send(method, path, { body })
        expect(response.status, path).toBe(401)
        expect(response.body).toEqual(missing)
      }
    }).pipe(Effect.provide(TestServer)))

  it.effect("the derived client sees the 401 as the typed Unauthorized error", () =>
    Effect.gen(function*() {
      const client = yield* clientWith(undefined)
      const error = yield* Effect.flip(client.pets.listPets({ query: {} }))
      expect(error).toMatchObject({ _tag: "Unauthorized", ...missing })
    }).pipe(Effect.provide(TestServer)))
})
