import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import { RateLimiter } from "../src/Auth/RateLimiter.js"
import { TemporaryPostgres } from "./support/PostgresStores.js"

const stores: ReadonlyArray<readonly [string, Layer.Layer<RateLimiter, unknown>]> = [
  ["in memory", RateLimiter.InMemory],
  ["PostgreSQL", RateLimiter.Postgres.pipe(Layer.provide(TemporaryPostgres))]
]

const policy = { name: "test", perSecond: 2, burst: 3 }

for (const [name, store] of stores) {
  describe(`RateLimiter contract, ${name}`, () => {
    it.effect("a bucket allows its burst, refuses the next with a wait, and refills at its rate", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter
        const taken = yield* Effect.forEach([1, 2, 3, 4], () => limiter.take(policy, "alice"))
        expect(taken.map((d) => [d.allowed, d.remaining])).toEqual([[true, 2], [true, 1], [true, 0], [false, 0]])
        expect(taken[3]).toMatchObject({ retryAfterSeconds: 1, resetSeconds: 2 })
        expect((yield* limiter.take(policy, "bob")).allowed).toBe(true)
        yield* TestClock.adjust("500 millis")
        expect(yield* limiter.peek(policy, "alice")).toMatchObject({ allowed: true, remaining: 1 })
        expect((yield* limiter.take(policy, "alice")).allowed).toBe(true)
        expect((yield* limiter.take(policy, "alice")).allowed).toBe(false)
        yield* TestClock.adjust("10 seconds")
        expect(yield* limiter.take(policy, "alice")).toMatchObject({ allowed: true, remaining: 2 })
      }).pipe(Effect.provide(store)))

    it.effect("concurrent takes never spend one token twice", () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter
        const taken = yield* Effect.forEach(Array.from({ length: 20 }), () => limiter.take(policy, "carol"), {
          concurrency: 20
        })
        expect(taken.filter((d) => d.allowed)).toHaveLength(3)
      }).pipe(Effect.provide(store)))
  })
}

describe("RateLimiter on PostgreSQL", () => {
  it.effect("is one set of buckets for every instance on the database", () =>
    Effect.gen(function*() {
      const database = yield* Layer.build(TemporaryPostgres)
      const instance = () => Effect.provide(RateLimiter, RateLimiter.Postgres.pipe(Layer.provide(Layer.succeedContext(database))))
      const [one, two] = [yield* instance(), yield* instance()]
      yield* one.take(policy, "dave")
      yield* two.take(policy, "dave")
      expect(yield* one.take(policy, "dave")).toMatchObject({ allowed: true, remaining: 0 })
      expect((yield* two.take(policy, "dave")).allowed).toBe(false)
    }).pipe(Effect.scoped))
})

describe("RateLimiter shares, for workers on SQLite", () => {
  it.effect("each of n workers enforces 1/n of the policy, so together they never allow more", () =>
    Effect.gen(function*() {
      const policy = { name: "test", perSecond: 2, burst: 4 }
      const worker = () => Effect.provide(RateLimiter, RateLimiter.InMemoryShare(2))
      const [one, two] = [yield* worker(), yield* worker()]
      const taken = yield* Effect.forEach([one, two, one, two, one, two], (limiter) => limiter.take(policy, "erin"))
      expect(taken.map((d) => d.allowed)).toEqual([true, true, true, true, false, false])
      expect(taken[0]!.policy).toMatchObject({ perSecond: 1, burst: 2 })
      yield* TestClock.adjust("1 second")
      expect((yield* one.take(policy, "erin")).allowed).toBe(true)
      expect((yield* one.take(policy, "erin")).allowed).toBe(false)
    }))
})
