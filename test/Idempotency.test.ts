import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { NewPet } from "../src/Domain/Pet.js"
import { fingerprint, fingerprintOf } from "../src/Pets/Idempotency.js"
import { PetRepository } from "../src/Pets/PetRepository.js"
import { makeInMemoryPetRepository } from "../src/Pets/PetRepositoryInMemory.js"
import { everyField, newPetFields, optionalFields, otherValues } from "./support/Pets.js"
import { TemporaryPostgres } from "./support/PostgresStores.js"
import { TemporarySqlite } from "./support/SqliteStores.js"
import { createKey, makeTestServer, send, TestServer } from "./support/TestServer.js"

const rex = JSON.stringify(everyField)
const tom = JSON.stringify({ name: "Tom", categoryId: 1 })

describe("idempotent creates, POST /v1/pets with Idempotency-Key", () => {
  it.effect("a retry with the same key and body returns the first answer and creates nothing", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const headers = { "idempotency-key": "create-rex-1" }
      const first = yield* send("POST", "/v1/pets", { key, headers, body: rex })
      // The same body written differently (keys in another order, spaced) is the same request.
      const retry = yield* send("POST", "/v1/pets", {
        key,
        headers,
        body: JSON.stringify(Object.fromEntries(Object.entries(everyField).reverse()), null, 1)
      })
      expect(first.status).toBe(201)
      expect(retry.status).toBe(201)
      expect(retry.text).toBe(first.text)
      expect(retry.headers["location"]).toBe(first.headers["location"])
      expect((yield* send("GET", "/v1/pets", { key })).body).toHaveLength(1)
    }).pipe(Effect.provide(TestServer)))

  it.effect("the same key with another body: 422 idempotency_key_reused, nothing created", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const headers = { "idempotency-key": "k" }
      yield* send("POST", "/v1/pets", { key, headers, body: rex })
      const reused = yield* send("POST", "/v1/pets", { key, headers, body: tom })
      expect(reused.status).toBe(422)
      expect(reused.body).toEqual({
        code: "idempotency_key_reused",
        message: "Idempotency-Key: was used with a different request body",
        status: 422
      })
      expect((yield* send("GET", "/v1/pets", { key })).body).toHaveLength(1)
    }).pipe(Effect.provide(TestServer)))

  it.effect("every field of the body takes part: a body differing in any one field is another request", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const headers = { "idempotency-key": "one-field" }
      yield* send("POST", "/v1/pets", { key, headers, body: rex })
      const bodies = [
        ...newPetFields.map((field) => ({ ...everyField, [field]: otherValues[field] })),
        ...optionalFields.map((field) => {
          const { [field]: _, ...rest } = everyField
          return rest
        })
      ]
      expect(bodies).toHaveLength(newPetFields.length + optionalFields.length)
      for (const body of bodies) {
        const response = yield* send("POST", "/v1/pets", { key, headers, body: JSON.stringify(body) })
        expect(response.status, JSON.stringify(body)).toBe(422)
      }
      expect((yield* send("GET", "/v1/pets", { key })).body).toHaveLength(1)
    }).pipe(Effect.provide(TestServer)))

  it.effect("keys are scoped to the API key; creates without a key are never deduplicated", () =>
    Effect.gen(function*() {
      const alice = (yield* createKey("alice")).key
      const bob = (yield* createKey("bob")).key
      const headers = { "idempotency-key": "shared" }
      const a = yield* send("POST", "/v1/pets", { key: alice, headers, body: rex })
      const b = yield* send("POST", "/v1/pets", { key: bob, headers, body: tom })
      expect([a.body.id, b.body.id]).toEqual([1, 2])
      yield* send("POST", "/v1/pets", { key: alice, body: rex })
      yield* send("POST", "/v1/pets", { key: alice, body: rex })
      expect((yield* send("GET", "/v1/pets", { key: alice })).body).toHaveLength(4)
    }).pipe(Effect.provide(TestServer)))

  it.effect("a key that is not 1 to 255 printable ASCII characters: 400 invalid_header, and nothing is created", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      for (const idempotencyKey of ["x".repeat(256), "tab\there", ""]) {
        const response = yield* send("POST", "/v1/pets", {
          key,
          headers: { "idempotency-key": idempotencyKey },
          body: rex
        })
        expect(response.status, JSON.stringify(idempotencyKey)).toBe(400)
        expect(response.body).toEqual({
          code: "invalid_header",
          message: "idempotency-key: must be 1 to 255 printable ASCII characters",
          status: 400
        })
      }
      expect((yield* send("GET", "/v1/pets", { key })).body).toEqual([])
    }).pipe(Effect.provide(TestServer)))

  it.effect("a retry while the first request is still running: 409 idempotency_request_in_progress", () =>
    Effect.gen(function*() {
      // The in-memory store, noting when the first request has reserved its key.
      const reserved = yield* Deferred.make<void>()
      const store = Layer.effect(
        PetRepository,
        Effect.map(makeInMemoryPetRepository, (pets) =>
          PetRepository.of({
            ...pets,
            reserve: (scope, abandonedAfterMillis) =>
              Effect.tap(pets.reserve(scope, abandonedAfterMillis), () => Deferred.succeed(reserved, undefined))
          }))
      )
      yield* Effect.gen(function*() {
        const { key } = yield* createKey()
        const headers = { "idempotency-key": "slow" }
        let finish: () => void = () => {}
        const slowBody = new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(new TextEncoder().encode(rex.slice(0, 10)))
            finish = () => {
              controller.enqueue(new TextEncoder().encode(rex.slice(10)))
              controller.close()
            }
          }
        })
        const first = yield* Effect.forkChild(send("POST", "/v1/pets", { key, headers, body: slowBody }))
        yield* Deferred.await(reserved)
        const meanwhile = yield* send("POST", "/v1/pets", { key, headers, body: rex })
        expect(meanwhile.status).toBe(409)
        expect(meanwhile.body).toEqual({
          code: "idempotency_request_in_progress",
          message: "Idempotency-Key: a request with this key is still being processed; retry later",
          status: 409
        })
        finish()
        const done = yield* Fiber.join(first)
        expect(done.status).toBe(201)
        const replay = yield* send("POST", "/v1/pets", { key, headers, body: rex })
        expect(replay.text).toBe(done.text)
      }).pipe(Effect.provide(makeTestServer(store)))
    }))

  it.effect("a first request that failed leaves the key free", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const headers = { "idempotency-key": "after-a-typo" }
      expect((yield* send("POST", "/v1/pets", { key, headers, body: `{"name":""}` })).status).toBe(400)
      expect((yield* send("POST", "/v1/pets", { key, headers, body: rex })).status).toBe(201)
    }).pipe(Effect.provide(TestServer)))

  it.effect("records are kept 24 hours", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const headers = { "idempotency-key": "daily" }
      const first = yield* send("POST", "/v1/pets", { key, headers, body: rex })
      yield* TestClock.adjust("23 hours")
      expect((yield* send("POST", "/v1/pets", { key, headers, body: rex })).body).toEqual(first.body)
      yield* TestClock.adjust("2 hours")
      expect((yield* send("POST", "/v1/pets", { key, headers, body: rex })).body.id).toBe(2)
    }).pipe(Effect.provide(TestServer)))
})

describe("the fingerprint of a createPet body, across upgrades", () => {
  // As the service recorded them before fields could be added: sha256 of the values in the
  // schema's order, absent as null (`["Rex",3,"available"]`, `["Tom",1,null]`).
  const recorded = {
    rex: "32983e3f83169846ded59557aa76b666db7df38e791381179b07e92db6b85f1a",
    tom: "5b7e90696de3202c9695a64fcded6d08b59f1f4b05aa96eae2ee9f6cebb94f46"
  }
  // The schema as it would be with an optional field added.
  const WithTags = Schema.Struct({ ...NewPet.fields, tags: Schema.optionalKey(Schema.Array(Schema.String)) })
  const withTags = fingerprintOf(Object.keys(WithTags.fields))

  it("is the value recorded before, with and without a field added", () => {
    for (const fingerprintOfBody of [fingerprint, withTags]) {
      expect(fingerprintOfBody({ name: "Rex", categoryId: 3, status: "available" })).toBe(recorded.rex)
      expect(fingerprintOfBody({ name: "Tom", categoryId: 1 })).toBe(recorded.tom)
    }
    // The added field takes part once given, an empty list too.
    expect(withTags({ name: "Tom", categoryId: 1, tags: [] })).not.toBe(recorded.tom)
    expect(withTags({ name: "Tom", categoryId: 1, tags: ["a"] })).not.toBe(withTags({ name: "Tom", categoryId: 1 }))
  })

  it.effect("a create recorded with the earlier fingerprint replays; another body still gets 422", () =>
    Effect.gen(function*() {
      const { key, record } = yield* createKey()
      const pets = yield* PetRepository
      const scope = { apiKeyId: record.id, key: "before-the-upgrade" }
      const claim = (yield* pets.reserve(scope, 5000)) as { claimedAt: number }
      const tom = yield* pets.createOnce(scope, claim.claimedAt, recorded.tom, { name: "Tom", categoryId: 1 })
      const headers = { "idempotency-key": scope.key }
      const retry = yield* send("POST", "/v1/pets", {
        key,
        headers,
        body: JSON.stringify({ name: "Tom", categoryId: 1 })
      })
      expect(retry.status).toBe(201)
      expect(retry.body).toEqual(tom)
      expect((yield* send("POST", "/v1/pets", { key, headers, body: rex })).status).toBe(422)
    }).pipe(Effect.provide(TestServer)))

  it.effect("a retry of a create made before a field was added, checked against the schema with it: the same answer", () =>
    Effect.gen(function*() {
      const { key, record } = yield* createKey()
      const headers = { "idempotency-key": "made-before-tags" }
      const first = yield* send("POST", "/v1/pets", { key, headers, body: tom })
      expect(first.status).toBe(201)
      // What the upgraded service does with the retry: the record's fingerprint against the
      // retried body decoded by the schema with the field.
      const pets = yield* PetRepository
      const found = yield* pets.reserve({ apiKeyId: record.id, key: headers["idempotency-key"] }, 5000)
      expect(found).toEqual({ _tag: "Completed", fingerprint: recorded.tom, pet: first.body })
      const retried = yield* Schema.decodeUnknownEffect(WithTags)(JSON.parse(tom))
      expect(withTags(retried)).toBe(found._tag === "Completed" ? found.fingerprint : undefined)
    }).pipe(Effect.provide(TestServer)))
})

const stores: ReadonlyArray<readonly [string, Layer.Layer<PetRepository, unknown>]> = [
  ["in memory", PetRepository.InMemory],
  ["SQLite", PetRepository.Sql.pipe(Layer.provide(TemporarySqlite))],
  ["PostgreSQL", PetRepository.Sql.pipe(Layer.provide(TemporaryPostgres))]
]

for (const [name, store] of stores) {
  describe(`PetRepository idempotency contract, ${name}`, () => {
    const scope = { apiKeyId: 1, key: "k" }
    // Every field, so that the replay is seen to return each of them.
    const pet = everyField

    // A request's deadline: an unfinished claim older than this is taken over.
    const deadline = 5000
    const reserved = { _tag: "Reserved", claimedAt: expect.any(Number) }

    it.effect("reserve, create once, then replay the completed record; another API key is another scope", () =>
      Effect.gen(function*() {
        const pets = yield* PetRepository
        const claim = yield* pets.reserve(scope, deadline)
        expect(claim).toEqual(reserved)
        expect(yield* pets.reserve(scope, deadline)).toEqual({ _tag: "InProgress" })
        const created = yield* pets.createOnce(scope, (claim as { claimedAt: number }).claimedAt, "fp", pet)
        expect(yield* pets.reserve(scope, deadline)).toEqual({ _tag: "Completed", fingerprint: "fp", pet: created })
        expect(yield* pets.reserve({ ...scope, apiKeyId: 2 }, deadline)).toEqual(reserved)
      }).pipe(Effect.provide(store)))

    it.effect("release frees an unfinished reservation, never a completed one", () =>
      Effect.gen(function*() {
        const pets = yield* PetRepository
        const first = (yield* pets.reserve(scope, deadline)) as { claimedAt: number }
        yield* pets.release(scope, first.claimedAt)
        const second = (yield* pets.reserve(scope, deadline)) as { claimedAt: number }
        expect(second).toEqual(reserved)
        yield* pets.createOnce(scope, second.claimedAt, "fp", pet)
        yield* pets.release(scope, second.claimedAt)
        expect((yield* pets.reserve(scope, deadline))._tag).toBe("Completed")
      }).pipe(Effect.provide(store)))

    it.effect("a claim is taken over once its request's deadline has passed; the first request can then neither complete nor release it", () =>
      Effect.gen(function*() {
        const pets = yield* PetRepository
        const first = (yield* pets.reserve(scope, deadline)) as { claimedAt: number }
        yield* TestClock.adjust(deadline)
        expect(yield* pets.reserve(scope, deadline)).toEqual({ _tag: "InProgress" })
        yield* TestClock.adjust(1)
        const second = (yield* pets.reserve(scope, deadline)) as { claimedAt: number }
        expect(second).toEqual(reserved)
        // The first request, late (its commit held up by the outage): nothing is created.
        const late = yield* Effect.result(pets.createOnce(scope, first.claimedAt, "fp", pet))
        expect(late._tag === "Failure" && late.failure._tag).toBe("ClaimTakenOver")
        yield* pets.release(scope, first.claimedAt)
        expect(yield* pets.reserve(scope, deadline)).toEqual({ _tag: "InProgress" })
        const created = yield* pets.createOnce(scope, second.claimedAt, "fp", pet)
        expect((yield* pets.list({ limit: 10 })).pets).toEqual([created])
        expect(yield* pets.reserve(scope, deadline)).toEqual({ _tag: "Completed", fingerprint: "fp", pet: created })
      }).pipe(Effect.provide(store)))
  })
}

for (const [name, database] of [["SQLite", TemporarySqlite], ["PostgreSQL", TemporaryPostgres]] as const) {
  describe(`the idempotency record, ${name}`, () => {
    it.effect("is written in one transaction with the pet: a failed insert completes nothing", () =>
      Effect.gen(function*() {
        const pets = yield* PetRepository
        const sql = yield* SqlClient.SqlClient
        const scope = { apiKeyId: 1, key: "k" }
        const { claimedAt } = (yield* pets.reserve(scope, 5000)) as { claimedAt: number }
        // Past the Schema, only the table's CHECK constraint refuses this status.
        const exit = yield* Effect.exit(
          pets.createOnce(scope, claimedAt, "fp", { name: "Rex", categoryId: 1, status: "lost" as never })
        )
        expect(exit._tag).toBe("Failure")
        const [{ n }] = yield* sql<{ n: number | bigint }>`SELECT count(*) AS n FROM pets`
        expect(Number(n)).toBe(0)
        expect(yield* sql`SELECT pet_id, fingerprint FROM idempotency_keys`).toEqual([{
          pet_id: null,
          fingerprint: null
        }])
      }).pipe(Effect.provide(PetRepository.Sql.pipe(Layer.provideMerge(database)))))
  })
}
