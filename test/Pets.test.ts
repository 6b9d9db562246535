import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Cursors } from "../src/Pets/Cursors.js"
import { authorizedClient, createKey, publicBaseUrl, send, TestServer } from "./support/TestServer.js"

const newPet = { name: "Rex", categoryId: 3, status: "available" } as const

describe("createPet, POST /v1/pets", () => {
  it.effect("answers 201 with the stored pet and its Location", () =>
    Effect.gen(function*() {
      const client = yield* authorizedClient
      const [pet, response] = yield* client.pets.createPet({
        headers: {},
        payload: newPet,
        responseMode: "decoded-and-response"
      })
      expect(response.status).toBe(201)
      expect(pet).toEqual({ id: 1, ...newPet })
      expect(response.headers["location"]).toBe("/v1/pets/1")
      expect(response.headers["content-type"]).toBe("application/json")
    }).pipe(Effect.provide(TestServer)))

  it.effect("stores an absent status as absent: the field is left out, never null", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      const created = yield* send("POST", "/v1/pets", { key, body: JSON.stringify({ name: "Tom", categoryId: 1 }) })
      expect(created.text).toBe(`{"id":1,"name":"Tom","categoryId":1}`)
      const fetched = yield* send("GET", "/v1/pets/1", { key })
      expect(fetched.text).toBe(`{"id":1,"name":"Tom","categoryId":1}`)
      const listed = yield* send("GET", "/v1/pets", { key })
      expect(listed.text).toBe(`[{"id":1,"name":"Tom","categoryId":1}]`)
    }).pipe(Effect.provide(TestServer)))

  it.effect("assigns ascending ids that are never reused", () =>
    Effect.gen(function*() {
      const client = yield* authorizedClient
      const ids = yield* Effect.forEach([1, 2, 3], () =>
        client.pets.createPet({ headers: {}, payload: newPet }).pipe(Effect.map((p) => p.id)))
      expect(ids).toEqual([1, 2, 3])
    }).pipe(Effect.provide(TestServer)))

  it.effect("accepts the boundaries: 1 and 255 characters, the largest safe integers", () =>
    Effect.gen(function*() {
      const client = yield* authorizedClient
      for (
        const payload of [
          { name: "a", categoryId: Number.MAX_SAFE_INTEGER },
          { name: "é".repeat(255), categoryId: -Number.MAX_SAFE_INTEGER, status: "sold" as const }
        ]
      ) {
        const pet = yield* client.pets.createPet({ headers: {}, payload })
        expect(pet).toEqual({ id: pet.id, ...payload })
      }
    }).pipe(Effect.provide(TestServer)))
})

describe("getPet, GET /v1/pets/{petId}", () => {
  it.effect("answers 200 with the pet", () =>
    Effect.gen(function*() {
      const client = yield* authorizedClient
      const created = yield* client.pets.createPet({ headers: {}, payload: newPet })
      const [pet, response] = yield* client.pets.getPet({
        params: { petId: created.id },
        responseMode: "decoded-and-response"
      })
      expect(response.status).toBe(200)
      expect(pet).toEqual(created)
    }).pipe(Effect.provide(TestServer)))

  it.effect("answers 404 pet_not_found for an unknown id", () =>
    Effect.gen(function*() {
      const client = yield* authorizedClient
      const error = yield* Effect.flip(client.pets.getPet({ params: { petId: 42 } }))
      expect(error).toMatchObject({ _tag: "NotFound", code: "pet_not_found", status: 404 })
      expect(error.message).toContain("42")
    }).pipe(Effect.provide(TestServer)))
})

describe("listPets, GET /v1/pets", () => {
  const seed = (count: number) =>
    Effect.gen(function*() {
      const client = yield* authorizedClient
      for (let i = 1; i <= count; i++) {
        yield* client.pets.createPet({
          headers: {},
          payload: { name: `pet ${i}`, categoryId: i, status: i % 3 === 0 ? "sold" : "available" }
        })
      }
      return client
    })

  it.effect("returns a bare array in ascending id order, 20 by default", () =>
    Effect.gen(function*() {
      const client = yield* seed(25)
      const pets = yield* client.pets.listPets({ query: {} })
      expect(pets.map((pet) => pet.id)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1))
      const { key } = yield* createKey()
      const raw = yield* send("GET", "/v1/pets?limit=1", { key })
      expect(raw.body).toEqual([{ id: 1, name: "pet 1", categoryId: 1, status: "available" }])
    }).pipe(Effect.provide(TestServer)))

  it.effect("links the next page, keeping limit and status; the last page has no Link", () =>
    Effect.gen(function*() {
      const client = yield* seed(10)
      const [first, response] = yield* client.pets.listPets({
        query: { limit: 3, status: "available" },
        responseMode: "decoded-and-response"
      })
      expect(first.map((pet) => pet.id)).toEqual([1, 2, 4])
      const link = response.headers["link"]!
      const next = new URL(/^<([^>]+)>; rel="next"$/.exec(link)![1]!)
      expect(next.origin + next.pathname).toBe(`${publicBaseUrl}/v1/pets`)
      expect(next.searchParams.get("limit")).toBe("3")
      expect(next.searchParams.get("status")).toBe("available")
      const cursor = next.searchParams.get("cursor")!
      const [second, secondResponse] = yield* client.pets.listPets({
        query: { limit: 3, status: "available", cursor },
        responseMode: "decoded-and-response"
      })
      expect(second.map((pet) => pet.id)).toEqual([5, 7, 8])
      expect(secondResponse.headers["link"]).toBeDefined()
      const [pets, lastResponse] = yield* client.pets.listPets({
        query: { limit: 100, status: "available", cursor },
        responseMode: "decoded-and-response"
      })
      expect(pets.map((pet) => pet.id)).toEqual([5, 7, 8, 10])
      expect(lastResponse.headers["link"]).toBeUndefined()
    }).pipe(Effect.provide(TestServer)))

  it.effect("walking the pages returns every matching pet exactly once, also while pets are added", () =>
    Effect.gen(function*() {
      const client = yield* seed(9)
      const seen: Array<number> = []
      let cursor: string | undefined
      let added = 0
      do {
        const [page, response] = yield* client.pets.listPets({
          query: { limit: 2, ...(cursor === undefined ? {} : { cursor }) },
          responseMode: "decoded-and-response"
        })
        seen.push(...page.map((pet) => pet.id))
        if (added++ < 3) yield* client.pets.createPet({ headers: {}, payload: newPet })
        const link = response.headers["link"]
        cursor = link === undefined ? undefined : new URL(/<([^>]+)>/.exec(link)![1]!).searchParams.get("cursor")!
      } while (cursor !== undefined)
      expect(seen).toEqual(Array.from({ length: 12 }, (_, i) => i + 1))
    }).pipe(Effect.provide(TestServer)))

  it.effect("refuses a tampered cursor, or one reused with another status filter, with 400 invalid_cursor", () =>
    Effect.gen(function*() {
      const client = yield* seed(5)
      const [, response] = yield* client.pets.listPets({
        query: { limit: 1, status: "available" },
        responseMode: "decoded-and-response"
      })
      const cursor = new URL(/<([^>]+)>/.exec(response.headers["link"]!)![1]!).searchParams.get("cursor")!
      const [payload, signature] = cursor.split(".")
      const forged = `${Buffer.from("3.available").toString("base64url")}.${signature}`
      for (
        const [query, reason] of [
          [{ cursor: forged, status: "available" }, "forged position"],
          [{ cursor: `${payload}.AAAA${signature!.slice(4)}`, status: "available" }, "altered signature"],
          [{ cursor: "not-a-cursor" }, "garbage"],
          [{ cursor, status: "sold" }, "other status"],
          [{ cursor }, "no status"]
        ] as const
      ) {
        const error = yield* Effect.flip(client.pets.listPets({ query }))
        expect(error, reason).toMatchObject({ _tag: "BadRequest", code: "invalid_cursor", status: 400 })
      }
    }).pipe(Effect.provide(TestServer)))

  it.effect("accepts a cursor only in the form it was issued: other base64 spellings of it are refused", () =>
    Effect.gen(function*() {
      const cursors = Cursors.make(new Uint8Array(32).fill(7))
      // The first position whose cursor holds a `-` or `_`, so that its `+`/`/` spelling differs.
      const afterId = Array.from({ length: 1000 }, (_, i) => i + 1).find((id) =>
        /[-_]/.test(cursors.encode({ afterId: id, status: "sold" }))
      )!
      const cursor = cursors.encode({ afterId, status: "sold" })
      expect(yield* cursors.decode(cursor, "sold")).toBe(afterId)
      const [payload, signature] = cursor.split(".") as [string, string]
      const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
      // 16 signature bytes take 22 characters, the last of which carries 4 bits that decoding drops.
      const lastBits = alphabet[alphabet.indexOf(signature.at(-1)!) ^ 1]!
      for (
        const [changed, reason] of [
          [`${payload}.${signature}==`, "padding"],
          [`${payload}.${signature.slice(0, -1)}${lastBits}`, "unused bits"],
          [cursor.replaceAll("-", "+").replaceAll("_", "/"), "+ and / for - and _"]
        ] as const
      ) {
        expect(Buffer.from(changed.split(".")[1]!, "base64url"), reason).toEqual(Buffer.from(signature, "base64url"))
        const error = yield* Effect.flip(cursors.decode(changed, "sold"))
        expect(error, reason).toMatchObject({ _tag: "BadRequest", code: "invalid_cursor", status: 400 })
      }
    }))

  it.effect("refuses a limit outside 1 to 100 and an unknown status with 400 invalid_parameter", () =>
    Effect.gen(function*() {
      const { key } = yield* createKey()
      for (
        const [query, message] of [
          ["limit=0", "limit: must be an integer from 1 to 100"],
          ["limit=101", "limit: must be an integer from 1 to 100"],
          ["limit=1.5", "limit: must be an integer from 1 to 100"],
          ["limit=ten", "limit: must be an integer from 1 to 100"],
          ["status=lost", "status: must be one of available, pending, sold"]
        ]
      ) {
        const response = yield* send("GET", `/v1/pets?${query}`, { key })
        expect(response.status, query).toBe(400)
        expect(response.body, query).toEqual({ code: "invalid_parameter", message, status: 400 })
      }
    }).pipe(Effect.provide(TestServer)))
})
