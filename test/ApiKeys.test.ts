import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { ApiKeyAlreadyRevoked, ApiKeyNotFound, ApiKeys, hashKey } from "../src/Auth/ApiKeys.js"
import { AppConfig } from "../src/Config/AppConfig.js"
import { TemporaryPostgres } from "./support/PostgresStores.js"
import { TemporarySqlite } from "./support/SqliteStores.js"
import { waitForEffect } from "./support/WaitFor.js"

const stores = (
  environment: "production" | "staging"
): ReadonlyArray<readonly [string, Layer.Layer<ApiKeys, unknown>]> => [
  ["in memory", ApiKeys.InMemory.pipe(Layer.provide(AppConfig.make({ environment })))],
  ["SQLite", ApiKeys.Sql.pipe(Layer.provide(TemporarySqlite), Layer.provide(AppConfig.make({ environment })))],
  ["PostgreSQL", ApiKeys.Sql.pipe(Layer.provide(TemporaryPostgres), Layer.provide(AppConfig.make({ environment })))]
]

for (const [name, store] of stores("staging")) {
  describe(`ApiKeys contract, ${name}`, () => {
    it.effect("a new key is random, prefixed by environment, and found by its hash", () =>
      Effect.gen(function*() {
        const keys = yield* ApiKeys
        const { key, record } = yield* keys.create("alice")
        const other = yield* keys.create("bob")
        const value = Redacted.value(key)
        expect(value).toMatch(/^ps_test_[A-Za-z0-9_-]{43}$/)
        expect(Redacted.value(other.key)).not.toBe(value)
        expect(record).toMatchObject({ id: 1, name: "alice", prefix: value.slice(0, 12) })
        expect(yield* keys.findActiveByHash(hashKey(value))).toStrictEqual(Option.some({ keyId: 1, name: "alice" }))
        expect(yield* keys.findActiveByHash(hashKey(value + "x"))).toStrictEqual(Option.none())
      }).pipe(Effect.provide(store)))

    it.effect("list shows id, name, prefix, created and revoked; revoke stops the key", () =>
      Effect.gen(function*() {
        const keys = yield* ApiKeys
        const { key } = yield* keys.create("alice")
        const revoked = yield* keys.revoke(1)
        expect(revoked.revokedAt._tag).toBe("Some")
        expect(yield* Effect.flip(keys.revoke(2))).toStrictEqual(new ApiKeyNotFound({ id: 2 }))
        expect(yield* keys.findActiveByHash(hashKey(Redacted.value(key)))).toStrictEqual(Option.none())
        const [listed] = yield* keys.list
        expect(Object.keys(listed!).sort()).toEqual(["createdAt", "id", "name", "prefix", "revokedAt"])
        expect(Option.isSome(listed!.revokedAt)).toBe(true)
      }).pipe(Effect.provide(store)))

    it.live("revoking a revoked key fails and keeps the first revocation time", () =>
      Effect.gen(function*() {
        const keys = yield* ApiKeys
        yield* keys.create("alice")
        const first = yield* keys.revoke(1)
        // A second revocation on the wall clock's next millisecond would be told apart from the first.
        yield* waitForEffect(
          Effect.sync(() => Date.now() > Option.getOrThrow(first.revokedAt).getTime()),
          { what: "the wall clock past the first revocation", interval: 1 }
        )
        const again = yield* Effect.flip(keys.revoke(1))
        expect(again).toBeInstanceOf(ApiKeyAlreadyRevoked)
        expect(again.message).toBe(
          `id: API key 1 (alice) was already revoked at ${Option.getOrThrow(first.revokedAt).toISOString()}`
        )
        const [listed] = yield* keys.list
        expect(listed!.revokedAt).toStrictEqual(first.revokedAt)
      }).pipe(Effect.provide(store)))
  })
}

describe("API keys in production", () => {
  for (const [name, store] of stores("production")) {
    it.effect(`are prefixed ps_live_ (${name})`, () =>
      Effect.gen(function*() {
        const { key } = yield* (yield* ApiKeys).create("prod")
        expect(Redacted.value(key)).toMatch(/^ps_live_/)
      }).pipe(Effect.provide(store)))
  }
})

describe("the SQLite key store", () => {
  it.effect("keeps only the SHA-256 hash, never the key", () =>
    Effect.gen(function*() {
      const { key } = yield* (yield* ApiKeys).create("alice")
      const rows = yield* (yield* SqlClient.SqlClient)`SELECT * FROM api_keys`
      expect(JSON.stringify(rows)).not.toContain(Redacted.value(key))
      expect(rows[0]).toMatchObject({ key_hash: hashKey(Redacted.value(key)) })
    }).pipe(Effect.provide(ApiKeys.Sql.pipe(Layer.provideMerge(TemporarySqlite), Layer.provide(AppConfig.make())))))
})

for (const [name, database] of [["SQLite", TemporarySqlite], ["PostgreSQL", TemporaryPostgres]] as const) {
  describe(`a running service's keys, ${name}`, () => {
    const store = ApiKeys.Sql.pipe(Layer.provideMerge(database), Layer.provide(AppConfig.make()))

    it.effect("a key revoked here is refused from the next lookup on", () =>
      Effect.gen(function*() {
        const keys = yield* ApiKeys
        const hash = hashKey(Redacted.value((yield* keys.create("alice")).key))
        expect(Option.isSome(yield* keys.findActiveByHash(hash))).toBe(true)
        yield* keys.revoke(1)
        expect(yield* keys.findActiveByHash(hash)).toStrictEqual(Option.none())
      }).pipe(Effect.provide(store)))

    it.effect("a key revoked by another process is trusted for half a second at most; a key not found is never remembered", () =>
      Effect.gen(function*() {
        const keys = yield* ApiKeys
        const sql = yield* SqlClient.SqlClient
        const hash = hashKey(Redacted.value((yield* keys.create("alice")).key))
        expect(Option.isSome(yield* keys.findActiveByHash(hash))).toBe(true)
        // What the keys command does, from another process.
        yield* sql`UPDATE api_keys SET revoked_at = ${new Date().toISOString()} WHERE id = 1`
        yield* TestClock.adjust(499)
        expect(Option.isSome(yield* keys.findActiveByHash(hash))).toBe(true)
        yield* TestClock.adjust(1)
        expect(yield* keys.findActiveByHash(hash)).toStrictEqual(Option.none())
        // Made valid again (as a new key would be): found at once.
        yield* sql`UPDATE api_keys SET revoked_at = NULL WHERE id = 1`
        expect(Option.isSome(yield* keys.findActiveByHash(hash))).toBe(true)
      }).pipe(Effect.provide(store)))
  })
}
