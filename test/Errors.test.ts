import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Layer, Logger, References } from "effect"
import { NewPet } from "../src/Domain/Pet.js"
import { PetRepository } from "../src/Pets/PetRepository.js"
import { createKey, makeTestServer, send, TestServer } from "./support/TestServer.js"

const errorBody = (status: number, code: string, message: string) => ({ code, message, status })

describe("every error answers with exactly {code, message, status}", () => {
  it.effect("a body that breaks NewPet: 400 validation_failed naming the field and the rule", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const cases: ReadonlyArray<readonly [unknown, string]> = [
        [{ categoryId: 1 }, "name: is missing"],
        [{ name: "", categoryId: 1 }, "name: must be a string of 1 to 255 characters of Unicode text without U+0000"],
        [
          { name: "x".repeat(256), categoryId: 1 },
          "name: must be a string of 1 to 255 characters of Unicode text without U+0000"
        ],
        [{ name: 7, categoryId: 1 }, "name: must be a string of 1 to 255 characters of Unicode text without U+0000"],
        [
          { name: "Rex\u0000", categoryId: 1 },
          "name: must be a string of 1 to 255 characters of Unicode text without U+0000"
        ],
        [
          { name: "Rex\ud800", categoryId: 1 },
          "name: must be a string of 1 to 255 characters of Unicode text without U+0000"
        ],
        [{ name: "Rex" }, "categoryId: is missing"],
        [{ name: "Rex", categoryId: 1.5 }, "categoryId: must be an integer from -9007199254740991 to 9007199254740991"],
        [{ name: "Rex", categoryId: "1" }, "categoryId: must be an integer from -9007199254740991 to 9007199254740991"],
        [{ name: "Rex", categoryId: 1, status: "lost" }, "status: must be one of available, pending, sold"],
        [{ name: "Rex", categoryId: 1, status: null }, "status: must be one of available, pending, sold"],
        [
          { name: "Rex", categoryId: 1, id: 5 },
          `id: is unexpected, expected: ${Object.keys(NewPet.fields).map((key) => `"${key}"`).join(" | ")}`
        ],
        [[], "body: Expected NewPet, actual []"]
      ]
      for (const [body, message] of cases) {
        const response = yield* send("POST", "/v1/pets", { key, body: JSON.stringify(body) })
        expect(response.status, message).toBe(400)
        expect(response.headers["content-type"]).toBe("application/json")
        expect(response.body).toEqual(errorBody(400, "validation_failed", message))
      }
      // Nothing was stored by any of them.
      expect((yield* send("GET", "/v1/pets", { key })).body).toEqual([])
    }).pipe(Effect.provide(TestServer)))

  it.effect("integers past the safe range are rejected, never rounded", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      for (const categoryId of ["9007199254740992", "9007199254740993", "-9007199254740993", "1e400"]) {
        const response = yield* send("POST", "/v1/pets", { key, body: `{"name":"Rex","categoryId":${categoryId}}` })
        expect(response.body, categoryId).toMatchObject({ code: "validation_failed", status: 400 })
      }
    }).pipe(Effect.provide(TestServer)))

  it.effect("malformed JSON: 400 malformed_json", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const broken = yield* send("POST", "/v1/pets", { key, body: `{"name":"Rex",` })
      expect(broken.body).toEqual(errorBody(400, "malformed_json", "body: is not valid JSON"))
      const empty = yield* send("POST", "/v1/pets", { key, body: "" })
      expect(empty.body).toEqual(errorBody(400, "malformed_json", "body: is empty; a JSON object is required"))
    }).pipe(Effect.provide(TestServer)))

  it.effect("a body nested deeper than 32 levels: 400 validation_failed, refused before it is parsed", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const deep = errorBody(400, "validation_failed", "body: must not nest arrays or objects more than 32 levels deep")
      for (const depth of [33, 5_000, 10_000]) {
        const arrays = yield* send("POST", "/v1/pets", { key, body: "[".repeat(depth) + "]".repeat(depth) })
        expect(arrays.status, `${depth} arrays`).toBe(400)
        expect(arrays.body).toEqual(deep)
        const objects = yield* send("POST", "/v1/pets", { key, body: `{"a":`.repeat(depth) + "1" + "}".repeat(depth) })
        expect(objects.body, `${depth} objects`).toEqual(deep)
      }
      // Unclosed brackets count too: the parser would recurse into them before failing.
      expect((yield* send("POST", "/v1/pets", { key, body: "[".repeat(20_000) })).body).toEqual(deep)
      // 32 levels are parsed and judged as a NewPet; brackets inside strings are text.
      const atLimit = yield* send("POST", "/v1/pets", { key, body: "[".repeat(32) + "]".repeat(32) })
      expect(atLimit.body).toMatchObject({
        code: "validation_failed",
        message: expect.stringMatching(/^body: Expected NewPet/)
      })
      const name = `[{"\\`.repeat(50)
      const created = yield* send("POST", "/v1/pets", { key, body: JSON.stringify({ name, categoryId: 1 }) })
      expect(created.status).toBe(201)
      expect(created.body.name).toBe(name)
    }).pipe(Effect.provide(TestServer)))

  it.effect("no error message repeats more than a short excerpt of what was sent", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const long = "x".repeat(30_000)
      const bodies = [
        "[".repeat(30) + JSON.stringify(long) + "]".repeat(30),
        JSON.stringify([long]),
        JSON.stringify({ name: "Rex", categoryId: 1, [long]: 1 })
      ]
      for (const body of bodies) {
        const response = yield* send("POST", "/v1/pets", { key, body })
        expect(response.status).toBe(400)
        expect(response.body.code).toBe("validation_failed")
        expect(response.body.message.length, response.body.message).toBeLessThanOrEqual(300)
        expect(response.body.message).toContain("xxxx…")
      }
      const unknownRoute = yield* send("GET", `/v1/${long.slice(0, 4000)}`)
      expect(unknownRoute.body).toEqual(errorBody(404, "route_not_found", `path: no route /v1/${"x".repeat(60)}…`))
    }).pipe(Effect.provide(TestServer)))

  it.effect("a body over 64 KiB: 413 payload_too_large, declared or streamed", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const big = JSON.stringify({ name: "x".repeat(70_000), categoryId: 1 })
      const declared = yield* send("POST", "/v1/pets", { key, body: big })
      expect(declared.status).toBe(413)
      expect(declared.body).toEqual(errorBody(413, "payload_too_large", "body: must be at most 65536 bytes"))
      const chunks = new TextEncoder().encode(big)
      const streamed = yield* send("POST", "/v1/pets", {
        key,
        body: new ReadableStream({
          start(controller) {
            for (let i = 0; i < chunks.length; i += 8192) controller.enqueue(chunks.subarray(i, i + 8192))
            controller.close()
          }
        })
      })
      expect(streamed.status).toBe(413)
      expect(streamed.body).toEqual(errorBody(413, "payload_too_large", "body: must be at most 65536 bytes"))
    }).pipe(Effect.provide(TestServer)))

  it.effect("a body that is not application/json: 415 unsupported_media_type", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      for (const contentType of ["text/plain", "application/x-www-form-urlencoded", "application/jsonp"]) {
        const response = yield* send("POST", "/v1/pets", {
          key,
          headers: { "content-type": contentType },
          body: new TextEncoder().encode(`{"name":"Rex","categoryId":1}`)
        })
        expect(response.status, contentType).toBe(415)
        expect(response.body).toEqual(
          errorBody(415, "unsupported_media_type", "Content-Type: must be application/json")
        )
      }
      const withCharset = yield* send("POST", "/v1/pets", {
        key,
        headers: { "content-type": "application/json; charset=utf-8" },
        body: `{"name":"Rex","categoryId":1}`
      })
      expect(withCharset.status).toBe(201)
    }).pipe(Effect.provide(TestServer)))

  it.effect("an unknown route: 404 route_not_found; a wrong method: 405 with Allow", () =>
    Effect.gen(function*() {
      const unknown = yield* send("GET", "/v1/owners")
      expect(unknown.status).toBe(404)
      expect(unknown.body).toEqual(errorBody(404, "route_not_found", "path: no route /v1/owners"))
      const wrongMethod = yield* send("DELETE", "/v1/pets/1")
      expect(wrongMethod.status).toBe(405)
      expect(wrongMethod.headers["allow"]).toBe("GET")
      expect(wrongMethod.body).toEqual(
        errorBody(405, "method_not_allowed", "method: DELETE is not allowed on /v1/pets/1; use GET")
      )
      const onCollection = yield* send("PUT", "/v1/pets")
      expect(onCollection.headers["allow"]).toBe("GET, POST")
    }).pipe(Effect.provide(TestServer)))

  it.effect("a petId that is not a decimal integer in the safe range: 400 invalid_parameter", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      for (const petId of ["abc", "1.5", "1e3", "0x10", "9007199254740992"]) {
        const response = yield* send("GET", `/v1/pets/${petId}`, { key })
        expect(response.status, petId).toBe(400)
        expect(response.body).toEqual(errorBody(
          400,
          "invalid_parameter",
          "petId: must be a decimal integer in the safe range, written canonically (no +, no leading zeros, no -0)"
        ))
      }
      // A percent-escape is no spelling a route declares.
      expect((yield* send("GET", "/v1/pets/%20", { key })).body).toMatchObject({ code: "route_not_found", status: 404 })
    }).pipe(Effect.provide(TestServer)))

  it.effect("an unexpected failure: 500 internal_error, its message only in the log with the request id", () => {
    const logged: Array<string> = []
    const BrokenStore = Layer.succeed(PetRepository, {
      create: () => Effect.die(new Error("disk on fire: /var/secret/path")),
      findById: () => Effect.die(new Error("disk on fire")),
      list: () => Effect.die(new Error("disk on fire")),
      reserve: () => Effect.die(new Error("disk on fire")),
      release: () => Effect.void,
      createOnce: () => Effect.die(new Error("disk on fire")),
      readiness: Effect.succeed("unavailable" as const)
    })
    const capture = Logger.layer([
      Logger.make(({ cause, fiber, message }) => {
        const annotations = fiber.getRef(References.CurrentLogAnnotations)
        logged.push(JSON.stringify({ message, annotations, cause: Cause.pretty(cause) }))
      })
    ])
    return Effect.gen(function*() {
      const { key } = yield* createKey()
      const response = yield* send("POST", "/v1/pets", {
        key,
        headers: { "x-request-id": "req-500" },
        body: `{"name":"Rex","categoryId":1}`
      })
      expect(response.status).toBe(500)
      expect(response.body).toEqual(
        errorBody(500, "internal_error", "The service failed unexpectedly; the request id names it in the log")
      )
      expect(response.text).not.toContain("fire")
      expect(response.headers["x-request-id"]).toBe("req-500")
      expect(logged.some((line) => line.includes("disk on fire") && line.includes("req-500"))).toBe(true)
      // One line naming the error; no stack trace (no frames, no source paths).
      expect(logged.join("\n")).not.toMatch(/\sat |\.ts:\d+/)
    }).pipe(Effect.provide(Layer.provideMerge(makeTestServer(BrokenStore), capture)))
  })
})
