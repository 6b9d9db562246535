import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { RateLimiter } from "../src/Auth/RateLimiter.js"
import { leaseSize, RateLimiterPostgres } from "../src/Auth/RateLimiterPostgres.js"
import { RecentMap } from "../src/Auth/RecentMap.js"
import { TemporaryPostgres } from "./support/PostgresStores.js"
import { waitForEffect } from "./support/WaitFor.js"

const stores: ReadonlyArray<readonly [string, Layer.Layer<RateLimiter, unknown>]> = [
  ["in memory", RateLimiter.InMemory],
  ["PostgreSQL", RateLimiterPostgres().pipe(Layer.provide(TemporaryPostgres))]
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
        expect(yield* limiter.take(policy, "alice")).toMatchObject({ allowed: true, remaining: 0 })
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
  const sharedBy = (instances: number, options: Parameters<typeof RateLimiterPostgres>[0] = {}) =>
    Effect.gen(function*() {
      const database = yield* Layer.build(TemporaryPostgres)
      const limiters = yield* Effect.forEach(
        Array.from({ length: instances }),
        () => Layer.build(RateLimiterPostgres(options).pipe(Layer.provide(Layer.succeedContext(database))))
      )
      return { database, limiters: limiters.map((context) => Context.get(context, RateLimiter)) }
    })

  it.effect("is one set of buckets for every instance on the database", () =>
    Effect.gen(function*() {
      const { limiters: [one, two] } = yield* sharedBy(2)
      yield* one!.take(policy, "dave")
      yield* two!.take(policy, "dave")
      expect(yield* one!.take(policy, "dave")).toMatchObject({ allowed: true, remaining: 0 })
      expect((yield* two!.take(policy, "dave")).allowed).toBe(false)
    }))

  it.effect("two instances spending one bucket at once never exceed it, and lose at most a lease each", () =>
    Effect.gen(function*() {
      const wide = { name: "wide", perSecond: 0.001, burst: 100 }
      const { limiters } = yield* sharedBy(2)
      const taken = yield* Effect.forEach(
        Array.from({ length: 300 }, (_, i) => limiters[i % 2]!),
        (limiter) => limiter.take(wide, "erin"),
        { concurrency: 64 }
      )
      const allowed = taken.filter((d) => d.allowed).length
      expect(allowed).toBeLessThanOrEqual(100)
      expect(allowed).toBeGreaterThanOrEqual(100 - 2 * leaseSize(wide))
    }))

  it.effect("writes once per lease, not once per request", () =>
    Effect.gen(function*() {
      const wide = { name: "wide", perSecond: 1000, burst: 200 }
      const { database, limiters: [one] } = yield* sharedBy(1)
      const sql = Context.get(database, SqlClient.SqlClient)
      const [before] = yield* sql<{ n: bigint }>`SELECT n_tup_ins + n_tup_upd AS n FROM pg_stat_user_tables
        WHERE relname = 'rate_limit_buckets'`
      yield* Effect.forEach(Array.from({ length: 200 }), () => one!.take(wide, "frank"))
      yield* sql`SELECT pg_stat_force_next_flush()`
      const [after] = yield* sql<{ n: bigint }>`SELECT n_tup_ins + n_tup_upd AS n FROM pg_stat_user_tables
        WHERE relname = 'rate_limit_buckets'`
      expect(Number(after!.n) - Number(before!.n)).toBe(200 / leaseSize(wide))
    }))

  it.effect("keeps at most the cap of buckets in the table, and deletes full ones", () =>
    Effect.gen(function*() {
      const { database, limiters: [one] } = yield* sharedBy(1, { maxSharedBuckets: 50, purgeEvery: "100 millis" })
      const sql = Context.get(database, SqlClient.SqlClient)
      yield* Effect.forEach(Array.from({ length: 400 }, (_, i) => `10.0.${i >> 8}.${i & 255}`), (address) =>
        one!.take(policy, address), { concurrency: 16 })
      const count = sql<{ n: bigint }>`SELECT count(*) AS n FROM rate_limit_buckets`.pipe(Effect.map(([row]) =>
        Number(row!.n)
      ))
      expect(yield* count).toBe(400)
      // The purge, woken by the TestClock, runs its statements in real time and sleeps again only
      // when they are done: read until they are, moving the clock on by `step` between reads.
      const countReaches = (expected: number, step = 0) =>
        waitForEffect(
          Effect.flatMap(count, (n) =>
            n === expected ? Effect.succeed(n) : Effect.as(TestClock.adjust(step), undefined)),
          { what: `${expected} buckets in the table`, timeout: 5000, interval: 20 }
        )
      yield* TestClock.adjust("200 millis")
      expect(yield* countReaches(50)).toBe(50)
      // A bucket refills at 2 a second: after 1 s every one is full again, the same as no row.
      yield* TestClock.adjust("1 second")
      expect(yield* countReaches(0, 100)).toBe(0)
    }))
})

// Its resident memory under a million addresses is held by the benchmark (`npm run bench -- --bounds`).
describe("RateLimiter state is bounded", () => {
  it.effect("forgets the least recently used bucket past the cap", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter
      const small = { name: "small", perSecond: 1, burst: 2 }
      for (const key of ["a", "b", "c"]) yield* limiter.take(small, key)
      yield* limiter.take(small, "a")
      // "a" has none left; "b", the least recently used, was forgotten when "d" came.
      yield* limiter.take(small, "d")
      expect((yield* limiter.take(small, "a")).allowed).toBe(false)
      expect(yield* limiter.take(small, "b")).toMatchObject({ allowed: true, remaining: 1 })
    }).pipe(Effect.provide(RateLimiter.inMemory({ maxBuckets: 4 }))))

  it.effect("keeps each policy's buckets apart, under the same key", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter
      const one = { name: "one", perSecond: 1, burst: 1 }
      const other = { name: "other", perSecond: 1, burst: 1 }
      expect((yield* limiter.take(one, "10.0.0.1")).allowed).toBe(true)
      expect((yield* limiter.take(one, "10.0.0.1")).allowed).toBe(false)
      expect((yield* limiter.take(other, "10.0.0.1")).allowed).toBe(true)
    }).pipe(Effect.provide(RateLimiter.InMemory)))
})

describe("RecentMap, the bounded map behind the buckets", () => {
  it("at its capacity forgets the least recently used, a read or a write keeping an entry", () => {
    const never = new RecentMap<number>(4, () => false)
    for (const key of ["a", "b", "c"]) never.set(key, 1, 0)
    never.get("a")
    never.set("d", 1, 0)
    expect(["a", "b", "c", "d"].map((key) => never.get(key))).toEqual([1, undefined, 1, 1])
    never.set("c", 2, 0)
    never.delete("a")
    for (const key of ["e", "f", "g"]) never.set(key, 1, 0)
    expect(["c", "d", "e", "f", "g"].map((key) => never.get(key))).toEqual([undefined, undefined, 1, 1, 1])
  })

  it("never holds more than its capacity, nor less than half of it once that many came", () => {
    const never = new RecentMap<number>(100, () => false)
    const sizes: Array<number> = []
    for (let i = 0; i < 1000; i++) {
      never.set(`k${i}`, i, 0)
      if (i % 7 === 0) never.get(`k${i >> 1}`)
      if (i >= 50) sizes.push(never.size)
    }
    expect(Math.max(...sizes)).toBeLessThanOrEqual(100)
    expect(Math.min(...sizes)).toBeGreaterThanOrEqual(50)
    // The newest half is always kept.
    expect(Array.from({ length: 50 }, (_, i) => never.get(`k${999 - i}`))).not.toContain(undefined)
  })

  it("drops the idle entries of its older half as new ones come, before that half is due to go", () => {
    const fullAt = new RecentMap<number>(10, (at, now) => at <= now)
    for (const [key, at] of [["a", 100], ["b", 100], ["c", 500], ["x", 900], ["y", 900]] as const) {
      fullAt.set(key, at, 0)
    }
    expect(fullAt.size).toBe(5)
    // "d" makes those five the older half; each new key sweeps two of it.
    fullAt.set("d", 900, 150)
    expect([fullAt.get("a"), fullAt.get("b"), fullAt.size]).toEqual([undefined, undefined, 4])
    fullAt.set("e", 900, 600)
    expect([fullAt.get("c"), fullAt.get("x"), fullAt.size]).toEqual([undefined, 900, 4])
  })

  it("refuses a capacity under 2, which could not keep its bound", () => {
    expect(() => new RecentMap<number>(1, () => false)).toThrow(RangeError)
  })
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
