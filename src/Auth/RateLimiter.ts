import type { HttpServerRequest } from "@effect/platform"
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Effect, Layer, Schedule } from "effect"
import { noteResponseHeaders } from "../Http/ResponseHeaders.js"

/** A token bucket: `burst` requests at once, refilled at `perSecond`. */
export interface RateLimitPolicy {
  readonly name: string
  readonly perSecond: number
  readonly burst: number
}

/** The outcome of taking one request from a bucket, with what the `RateLimit` headers report. */
export interface RateLimitDecision {
  readonly allowed: boolean
  readonly policy: RateLimitPolicy
  /** Requests left now. */
  readonly remaining: number
  /** Seconds until the bucket is full again. */
  readonly resetSeconds: number
  /** Seconds until one request is allowed (0 when allowed). */
  readonly retryAfterSeconds: number
}

interface Bucket {
  tokens: number
  updatedAt: number
}

/**
 * Token buckets by key: in this process's memory, or in PostgreSQL for every instance. `peek`
 * looks without taking, so a limit can be checked before work whose failure alone should count
 * (failed authentications).
 */
export class RateLimiter extends Context.Tag("petstore/RateLimiter")<
  RateLimiter,
  {
    readonly take: (policy: RateLimitPolicy, key: string) => Effect.Effect<RateLimitDecision>
    readonly peek: (policy: RateLimitPolicy, key: string) => Effect.Effect<RateLimitDecision>
  }
>() {
  static readonly InMemory = Layer.sync(RateLimiter, () => {
    const buckets = new Map<string, Bucket>()
    const decide = (policy: RateLimitPolicy, key: string, now: number, take: boolean): RateLimitDecision => {
      const id = `${policy.name}\u0000${key}`
      const bucket = buckets.get(id) ?? { tokens: policy.burst, updatedAt: now }
      bucket.tokens = Math.min(policy.burst, bucket.tokens + ((now - bucket.updatedAt) / 1000) * policy.perSecond)
      bucket.updatedAt = now
      const allowed = bucket.tokens >= 1
      if (allowed && take) bucket.tokens -= 1
      if (bucket.tokens >= policy.burst) buckets.delete(id)
      else buckets.set(id, bucket)
      return decision(policy, allowed, bucket.tokens)
    }
    return RateLimiter.of({
      take: (policy, key) => Effect.map(Clock.currentTimeMillis, (now) => decide(policy, key, now, true)),
      peek: (policy, key) => Effect.map(Clock.currentTimeMillis, (now) => decide(policy, key, now, false))
    })
  })

  /**
   * Token buckets in a PostgreSQL table, shared by every instance on the database: one statement
   * refills, decides and takes, under the row's lock, so concurrent requests on any instance
   * never spend the same token twice.
   */
  static readonly Postgres = Layer.scoped(
    RateLimiter,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const decide = (policy: RateLimitPolicy, key: string, take: 0 | 1) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const refilled = sql.literal(
            `LEAST(${policy.burst}::float8, b.tokens + GREATEST(0, ${now}::bigint - b.updated_at) * ${policy.perSecond / 1000}::float8)`
          )
          return sql<{ allowed: boolean; tokens: number }>`
            INSERT INTO rate_limit_buckets AS b (bucket, tokens, allowed, updated_at)
            VALUES (${`${policy.name}:${key}`}, ${policy.burst - take}, true, ${now})
            ON CONFLICT (bucket) DO UPDATE SET
              allowed = ${refilled} >= 1,
              tokens = ${refilled} - CASE WHEN ${refilled} >= 1 THEN ${take}::float8 ELSE 0 END,
              updated_at = GREATEST(b.updated_at, excluded.updated_at)
            RETURNING allowed, tokens`
        }).pipe(
          Effect.map(([row]) => decision(policy, row!.allowed, row!.tokens)),
          Effect.orDie
        )
      const purgeFull = Effect.flatMap(
        Clock.currentTimeMillis,
        (now) => sql`DELETE FROM rate_limit_buckets WHERE updated_at < ${now - bucketRetentionMillis}`
      )
      yield* purgeFull.pipe(Effect.repeat(Schedule.spaced("1 minute")), Effect.ignoreLogged, Effect.forkScoped)
      return RateLimiter.of({ take: (policy, key) => decide(policy, key, 1), peek: (policy, key) => decide(policy, key, 0) })
    })
  )

  /**
   * Buckets in this process for one of `workers` processes that share a SQLite database: each
   * enforces its share of every policy, so together they never allow more than the policy. (A
   * bucket in SQLite itself would make every request a write, and the workers would queue on
   * SQLite's lock.)
   */
  static readonly InMemoryShare = (workers: number) =>
    Layer.map(RateLimiter.InMemory, (context) => {
      const whole = Context.get(context, RateLimiter)
      const share = (policy: RateLimitPolicy): RateLimitPolicy => ({
        ...policy,
        perSecond: policy.perSecond / workers,
        burst: Math.max(1, Math.floor(policy.burst / workers))
      })
      return Context.make(
        RateLimiter,
        RateLimiter.of({
          take: (policy, key) => whole.take(share(policy), key),
          peek: (policy, key) => whole.peek(share(policy), key)
        })
      )
    })
}

/** Buckets untouched for a day are long full again: the same as no row. */
const bucketRetentionMillis = 24 * 60 * 60 * 1000

const decision = (policy: RateLimitPolicy, allowed: boolean, tokens: number): RateLimitDecision => ({
  allowed,
  policy,
  remaining: Math.floor(tokens),
  resetSeconds: Math.ceil((policy.burst - tokens) / policy.perSecond),
  retryAfterSeconds: allowed ? 0 : Math.ceil((1 - tokens) / policy.perSecond)
})

/**
 * The headers of draft-ietf-httpapi-ratelimit-headers-10: `RateLimit-Policy` names the quota
 * (`q` requests per `w` seconds), `RateLimit` what is left (`r`) and when it is whole again (`t`).
 */
export const rateLimitHeaders = ({ policy, remaining, resetSeconds, retryAfterSeconds }: RateLimitDecision) => ({
  "ratelimit-policy": `"${policy.name}";q=${policy.burst};w=${Math.ceil(policy.burst / policy.perSecond)}`,
  ratelimit: `"${policy.name}";r=${remaining};t=${resetSeconds}`,
  ...(retryAfterSeconds > 0 ? { "retry-after": String(retryAfterSeconds) } : {})
})

/** The `RateLimit` headers of the last decision about a request, for its response. */
export const noteRateLimit = (request: HttpServerRequest.HttpServerRequest, decision: RateLimitDecision) =>
  noteResponseHeaders(request, rateLimitHeaders(decision))
