import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { join } from "node:path"
import { rawGet, rawRequest } from "./support/RawSocket.js"
import { runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"
import { createKey, send, TestServer } from "./support/TestServer.js"
import { waitFor } from "./support/WaitFor.js"

const errorBody = (status: number, code: string, message: string) => ({ code, message, status })

describe("routes match as declared (the real server process, raw requests)", () => {
  const folder = temporaryFolder()
  const env = { DATABASE_URL: join(folder.path, "petstore.db"), LOG_LEVEL: "info" }
  let server: Awaited<ReturnType<typeof startServer>>
  let auth: Record<string, string>
  beforeAll(async () => {
    const created = await runCommand(["src/bin/keys.ts", "create", "--name", "routes"], env)
    auth = { authorization: `Bearer ${created.stdout.trim().split("\n").at(-1)}` }
    server = await startServer(env)
  })
  afterAll(async () => {
    await server.stop()
    folder[Symbol.dispose]()
  })

  it("the declared spellings are served, with or without a query", async () => {
    for (const target of ["/v1/pets", "/v1/pets?limit=1", "/livez", "/v1/openapi.json", "/docs"]) {
      expect((await rawRequest(server.url, rawGet(target, auth))).status, target).toBe(200)
    }
  })

  it("any other spelling is 404 route_not_found: case, doubled or trailing slashes, ; parameters, escapes", async () => {
    const paths = [
      "/V1/PETS",
      "/v1/Pets",
      "/DOCS",
      "/Docs",
      "/LIVEZ",
      "/v1/OPENAPI.JSON",
      "//v1/pets",
      "/v1//pets",
      "//docs",
      "/v1/pets/",
      "/docs/",
      "/livez/",
      "/v1/pets//1",
      "/v1/pets;x",
      "/docs;x",
      "/v1/pets/1;x",
      "/v1/%70ets",
      "/%64ocs",
      "/v1/pets/%31"
    ]
    for (const path of paths) {
      const response = await rawRequest(server.url, rawGet(path, auth))
      expect(response.status, path).toBe(404)
      expect(response.headers["content-type"], path).toBe("application/json")
      expect(JSON.parse(response.body), path).toEqual(errorBody(404, "route_not_found", `path: no route ${path}`))
    }
    // Also for the other methods: an unknown spelling is no route, not a method of one.
    const post = await rawRequest(server.url, "POST /V1/PETS HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    expect(post.status).toBe(404)
    // Each request is logged under the path as sent, so one route is never split into many.
    const notFound = () =>
      server.logs().split("\n").filter((line) => line.includes(`"message":"request"`)).map((line) =>
        JSON.parse(line).annotations
      ).filter(({ status }) => status === 404).map(({ path }) => path)
    // Log lines are written a moment after their answer.
    await waitFor(() => paths.every((path) => notFound().includes(path)), {
      what: "every 404's log line",
      timeout: 1000
    })
      .catch(() => undefined)
    expect(notFound()).toEqual(expect.arrayContaining(paths))
  })

  it("dot segments (`..`, `.`, `%2e`) and backslashes are resolved by Bun before the service sees the path", async () => {
    // The service cannot tell these from the resolved path: a proxy's path rules must resolve them too.
    const targets = ["/v1/x/../pets", "/v1/./pets", "/v1/x/%2e%2e/pets", "/v1\\pets"]
    for (const [index, target] of targets.entries()) {
      const response = await rawRequest(server.url, rawGet(target, { ...auth, "x-request-id": `dots-${index}` }))
      expect(response.status, target).toBe(200)
    }
    const logged = () =>
      server.logs().split("\n").filter((line) => line.includes(`"requestId":"dots-`)).map((line) =>
        JSON.parse(line).annotations.path
      )
    await waitFor(() => logged().length >= targets.length, { what: "every request's log line", timeout: 1000 })
      .catch(() => undefined)
    expect(logged()).toEqual(targets.map(() => "/v1/pets"))
  })
})

describe("path parameters are canonical", () => {
  it.effect("a petId of 01, +1, -0 or any other spelling than the integer's own: 400 invalid_parameter", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const created = yield* send("POST", "/v1/pets", { key, body: `{"name":"Rex","categoryId":1}` })
      expect(created.body.id).toBe(1)
      expect((yield* send("GET", "/v1/pets/1", { key })).status).toBe(200)
      for (const petId of ["01", "+1", "-0", "00", "0001", "00000000000000001", "1.0", "1e0"]) {
        const response = yield* send("GET", `/v1/pets/${petId}`, { key })
        expect(response.status, petId).toBe(400)
        expect(response.body).toEqual(errorBody(
          400,
          "invalid_parameter",
          "petId: must be a decimal integer in the safe range, written canonically (no +, no leading zeros, no -0)"
        ))
      }
      // The canonical spellings of integers that name no animal are simply not found.
      for (const petId of ["0", "-1", "9007199254740991"]) {
        expect((yield* send("GET", `/v1/pets/${petId}`, { key })).body, petId).toMatchObject({ code: "pet_not_found" })
      }
    }).pipe(Effect.provide(TestServer)))
})
