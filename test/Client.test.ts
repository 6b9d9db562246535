import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger, Redacted, Stream } from "effect"
import { TestClock } from "effect/testing"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { PetStoreApi } from "../src/Api.js"
import { createPetStoreClient, Gone, NotFound, Unauthorized } from "../src/client.js"
import { PetStoreClient } from "../src/Client/PetStoreClient.js"
import { petTable } from "../src/CommandLine/PetTable.js"
import { runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"
import { createKey, TestServer } from "./support/TestServer.js"

/** The client over the in-memory test server, with a fresh key. */
const InMemoryClient = Layer.unwrap(
  Effect.map(
    createKey(),
    ({ key }) =>
      PetStoreClient.layerWithoutHttpClient({ target: { baseUrl: "" }, apiKey: key, retryBaseDelay: "1 millis" })
  )
).pipe(Layer.provideMerge(TestServer))

describe("PetStoreClient, against the in-memory service", () => {
  it.effect("creates, lists and gets pets", () =>
    Effect.gen(function*() {
      const client = yield* PetStoreClient
      const rex = yield* client.createPet({ name: "Rex", categoryId: 3, status: "available" })
      expect(rex).toEqual({ id: 1, name: "Rex", categoryId: 3, status: "available" })
      const page = yield* client.listPets({ status: "available" })
      expect(page.pets).toEqual([rex])
      expect(page.next._tag).toBe("None")
      expect(yield* client.getPet(1)).toEqual(rex)
    }).pipe(Effect.provide(InMemoryClient)))

  it.effect("has every endpoint of the API definition as a method of its group, in the Effect and the Promise client", () =>
    Effect.gen(function*() {
      const client = yield* PetStoreClient
      const promises = createPetStoreClient({ target: { baseUrl: "http://127.0.0.1:9" }, apiKey: "ps_test_x" })
      const endpoints = Object.values(PetStoreApi.groups).flatMap((group) =>
        Object.keys(group.endpoints).map((name) => [group.identifier, name] as const)
      )
      expect(endpoints).toContainEqual(["health", "readyz"])
      for (const [group, name] of endpoints) {
        expect(typeof (client as unknown as Record<string, Record<string, unknown>>)[group]?.[name], name).toBe(
          "function"
        )
        expect(typeof (promises as unknown as Record<string, Record<string, unknown>>)[group]?.[name], name).toBe(
          "function"
        )
      }
      yield* Effect.promise(() => promises.close())
      const rex = yield* client.createPet({ name: "Rex", categoryId: 3 })
      expect(yield* client.pets.getPet({ params: { petId: rex.id } })).toEqual(rex)
      expect(yield* client.pets.listPets({ query: { limit: 1 } })).toEqual([rex])
      expect(yield* client.health.livez()).toEqual({ status: "ok" })
    }).pipe(Effect.provide(InMemoryClient)))

  it.effect("reports the interface's errors typed, with code, message and status", () =>
    Effect.gen(function*() {
      const client = yield* PetStoreClient
      const notFound = yield* Effect.flip(client.getPet(99))
      expect(notFound).toBeInstanceOf(NotFound)
      expect(notFound).toMatchObject({ code: "pet_not_found", status: 404 })
      const invalid = yield* Effect.flip(client.createPet({ name: "", categoryId: 1 }))
      // The client checks payloads with the same Schema before sending.
      expect(invalid._tag).toBe("SchemaError")
      const badCursor = yield* Effect.flip(client.listPets({ cursor: "forged" }))
      expect(badCursor).toMatchObject({ _tag: "BadRequest", code: "invalid_cursor", status: 400 })
    }).pipe(Effect.provide(InMemoryClient)))

  it.effect("an idempotent create sent twice creates one pet", () =>
    Effect.gen(function*() {
      const client = yield* PetStoreClient
      const first = yield* client.createPet({ name: "Rex", categoryId: 1 }, { idempotencyKey: "rex-once" })
      const again = yield* client.createPet({ name: "Rex", categoryId: 1 }, { idempotencyKey: "rex-once" })
      expect(again).toEqual(first)
      const reused = yield* Effect.flip(
        client.createPet({ name: "Tom", categoryId: 1 }, { idempotencyKey: "rex-once" })
      )
      expect(reused).toMatchObject({ _tag: "UnprocessableContent", code: "idempotency_key_reused", status: 422 })
      expect((yield* client.listPets()).pets).toHaveLength(1)
    }).pipe(Effect.provide(InMemoryClient)))

  it.effect("sees getPet's removal at the sunset as the typed Gone error", () =>
    Effect.gen(function*() {
      const client = yield* PetStoreClient
      yield* client.createPet({ name: "Rex", categoryId: 1 })
      yield* TestClock.setTime(Date.parse("2030-12-05T00:00:00Z"))
      const removed = yield* Effect.flip(client.getPet(1))
      expect(removed).toBeInstanceOf(Gone)
      expect(removed).toMatchObject({ code: "endpoint_removed", status: 410 })
    }).pipe(Effect.provide(InMemoryClient)))

  it.effect("listAll follows the Link header over more than three pages, with a status filter", () =>
    Effect.gen(function*() {
      const client = yield* PetStoreClient
      for (let i = 1; i <= 20; i++) {
        yield* client.createPet({ name: `pet ${i}`, categoryId: i, status: i % 2 === 0 ? "sold" : "available" })
      }
      const sold = yield* Stream.runCollect(client.listAll({ status: "sold", pageSize: 3 }))
      expect(sold.map((pet) => pet.id)).toEqual([2, 4, 6, 8, 10, 12, 14, 16, 18, 20])
      // Lazily: taking two pets fetches only the first page.
      const firstTwo = yield* Stream.runCollect(Stream.take(client.listAll({ pageSize: 2 }), 2))
      expect(firstTwo).toHaveLength(2)
    }).pipe(Effect.provide(InMemoryClient)))

  it.effect("warns once per client that getPet is deprecated, with the sunset date", () => {
    const warnings: Array<string> = []
    const capture = Logger.layer([
      Logger.make(({ logLevel, message }) => {
        if (logLevel === "Warn") warnings.push(Array.isArray(message) ? message.join(" ") : String(message))
      })
    ])
    return Effect.gen(function*() {
      const client = yield* PetStoreClient
      yield* client.createPet({ name: "Rex", categoryId: 1 })
      yield* client.getPet(1)
      yield* client.getPet(1)
      expect(warnings).toEqual([
        "GET /v1/pets/{petId} is deprecated and will be removed on Thu, 05 Dec 2030 00:00:00 GMT; use listPets with status"
      ])
    }).pipe(Effect.provide(Layer.provideMerge(InMemoryClient, capture)))
  })
})

/** A server that answers 503 to the first `failures` requests, then like the service. */
const flakyServer = (failures: number, retryAfter?: string) => {
  const seen: Array<{ method: string; idempotencyKey: string | null }> = []
  const times: Array<number> = []
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(request) {
      seen.push({ method: request.method, idempotencyKey: request.headers.get("idempotency-key") })
      times.push(performance.now())
      if (seen.length <= failures) {
        return Response.json({ code: "shutting_down", message: "retry", status: 503 }, {
          status: 503,
          headers: retryAfter === undefined ? {} : { "retry-after": retryAfter }
        })
      }
      const pet = { id: 1, name: "Rex", categoryId: 1 }
      return request.method === "GET" ? Response.json([pet]) : Response.json(pet, { status: 201 })
    }
  })
  return { url: `http://127.0.0.1:${server.port}`, seen, times, [Symbol.dispose]: () => server.stop(true) }
}

const clientOf = (url: string) =>
  PetStoreClient.layer({ target: { baseUrl: url }, apiKey: Redacted.make("ps_test_x"), retryBaseDelay: "1 millis" })

describe("PetStoreClient retries", () => {
  it.live("a GET after 503s, until it succeeds", () =>
    Effect.gen(function*() {
      using server = flakyServer(2)
      const page = yield* Effect.flatMap(PetStoreClient, (client) => client.listPets()).pipe(
        Effect.provide(clientOf(server.url))
      )
      expect(page.pets).toEqual([{ id: 1, name: "Rex", categoryId: 1 }])
      expect(server.seen.length).toBe(3)
    }))

  it.live("a POST only when it carries an idempotency key", () =>
    Effect.gen(function*() {
      using plain = flakyServer(2)
      const refused = yield* Effect.flip(
        Effect.flatMap(PetStoreClient, (client) => client.createPet({ name: "Rex", categoryId: 1 })).pipe(
          Effect.provide(clientOf(plain.url))
        )
      )
      expect(refused).toBeDefined()
      expect(plain.seen.length).toBe(1)

      using keyed = flakyServer(2)
      const pet = yield* Effect.flatMap(
        PetStoreClient,
        (client) => client.createPet({ name: "Rex", categoryId: 1 }, { idempotencyKey: "create-rex-1" })
      ).pipe(Effect.provide(clientOf(keyed.url)))
      expect(pet.id).toBe(1)
      expect(keyed.seen).toEqual(Array(3).fill({ method: "POST", idempotencyKey: "create-rex-1" }))
    }))

  it.live("after the wait a 503's Retry-After asks for, and not at all past maxRetryAfter", () =>
    Effect.gen(function*() {
      using patient = flakyServer(1, "1")
      yield* Effect.flatMap(PetStoreClient, (client) => client.listPets()).pipe(Effect.provide(clientOf(patient.url)))
      expect(patient.seen.length).toBe(2)
      expect(patient.times[1]! - patient.times[0]!).toBeGreaterThanOrEqual(990)

      using distant = flakyServer(1, new Date(Date.now() + 120_000).toUTCString())
      yield* Effect.flip(
        Effect.flatMap(PetStoreClient, (client) => client.listPets()).pipe(Effect.provide(clientOf(distant.url)))
      )
      expect(distant.seen.length).toBe(1)
    }))

  it.live("a connection error, and gives up after the configured retries", () =>
    Effect.gen(function*() {
      const unreachable = "http://127.0.0.1:9" // discard port: nothing listens
      const error = yield* Effect.flip(
        Effect.flatMap(PetStoreClient, (client) => client.listPets()).pipe(Effect.provide(clientOf(unreachable)))
      )
      expect(error).toMatchObject({ _tag: "HttpClientError", reason: { _tag: "TransportError" } })
    }))
})

describe("the client against the real server process", () => {
  it("the Promise facade (under Bun and Node.js) and the command line", async () => {
    using folder = temporaryFolder()
    const env = { DATABASE_URL: join(folder.path, "petstore.db") }
    const key = (await runCommand(["src/bin/keys.ts", "create", "--name", "client"], env)).stdout.trim().split("\n").at(
      -1
    )!
    const server = await startServer(env)
    try {
      const client = createPetStoreClient({ target: { baseUrl: server.url }, apiKey: key })
      const rex = await client.createPet({ name: "Rex", categoryId: 3, status: "pending" })
      expect(rex).toEqual({ id: 1, name: "Rex", categoryId: 3, status: "pending" })
      for (let i = 0; i < 6; i++) await client.createPet({ name: `p${i}`, categoryId: i, status: "pending" })
      const all: Array<number> = []
      for await (const pet of client.listAll({ status: "pending", pageSize: 2 })) all.push(pet.id)
      expect(all).toEqual([1, 2, 3, 4, 5, 6, 7])
      // The endpoints as derived, beside the conveniences.
      expect(await client.pets.listPets({ query: { status: "pending", limit: 2 } })).toHaveLength(2)
      expect(await client.health.readyz()).toEqual({ status: "ok", database: "ready" })
      await expect(client.pets.getPet({ params: { petId: 99 } })).rejects.toBeInstanceOf(NotFound)
      await expect(client.getPet(99)).rejects.toBeInstanceOf(NotFound)
      await expect(client.getPet(99)).rejects.toMatchObject({ code: "pet_not_found", status: 404 })
      const outsider = createPetStoreClient({ target: { baseUrl: server.url }, apiKey: "ps_test_nope" })
      await expect(outsider.listPets()).rejects.toBeInstanceOf(Unauthorized)
      await client.close()
      await outsider.close()

      // The same client under Node.js, built for it.
      using nodeFolder = temporaryFolder()
      const build = Bun.spawnSync(
        ["bun", "build", "src/client.ts", "--target=node", "--outfile", join(nodeFolder.path, "client.mjs")],
        { cwd: new URL("..", import.meta.url).pathname }
      )
      expect(build.exitCode, build.stderr.toString()).toBe(0)
      writeFileSync(
        join(nodeFolder.path, "main.mjs"),
        `import { createPetStoreClient, NotFound } from "./client.mjs"
const client = createPetStoreClient({ target: { baseUrl: process.env.BASE_URL }, apiKey: process.env.API_KEY })
const pet = await client.createPet({ name: "Node", categoryId: 9 })
const missing = await client.getPet(999).catch((error) => error instanceof NotFound && error.code)
console.log(JSON.stringify({ pet, missing }))
await client.close()
`
      )
      const node = Bun.spawnSync(["node", join(nodeFolder.path, "main.mjs")], {
        env: { ...process.env, BASE_URL: server.url, API_KEY: key }
      })
      expect(node.exitCode, node.stderr.toString()).toBe(0)
      expect(JSON.parse(node.stdout.toString())).toEqual({
        pet: { id: 8, name: "Node", categoryId: 9 },
        missing: "pet_not_found"
      })

      const cli = (args: Array<string>, apiKey = key) =>
        runCommand(["src/bin/cli.ts", "pets", ...args, "--base-url", server.url], { PETSTORE_API_KEY: apiKey })
      const created = await cli(["create", "--name", "Tom", "--category-id", "4"])
      expect(created.exitCode).toBe(0)
      expect(created.stdout).toBe(`${petTable([{ id: 9, name: "Tom", categoryId: 4 }])}\n`)
      const listed = await cli(["list", "--status", "pending", "--limit", "2", "--json"])
      expect(JSON.parse(listed.stdout).map((pet: { id: number }) => pet.id)).toEqual([1, 2])
      const everything = await cli(["list", "--all", "--limit", "3", "--json"])
      expect(JSON.parse(everything.stdout)).toHaveLength(9)
      const got = await cli(["get", "9", "--json"])
      expect(JSON.parse(got.stdout)).toEqual({ id: 9, name: "Tom", categoryId: 4 })
      const missing = await cli(["get", "99"])
      expect(missing.exitCode).not.toBe(0)
      expect(missing.stderr).toContain("petId: no animal has id 99")
      const refused = await cli(["list"], "ps_test_nope")
      expect(refused.exitCode).not.toBe(0)
      expect(refused.stderr).toContain("Authorization: the API key is unknown or revoked")
    } finally {
      await server.stop()
    }
  })
})
