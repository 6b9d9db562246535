import type { HttpServerRequest } from "@effect/platform"
import { Clock, Context, Effect, Layer } from "effect"

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
 * Token buckets by key, in this process's memory. `peek` looks without taking, so a limit can be
 * checked before work whose failure alone should count (failed authentications).
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
      return {
        allowed,
        policy,
        remaining: Math.floor(bucket.tokens),
        resetSeconds: Math.ceil((policy.burst - bucket.tokens) / policy.perSecond),
        retryAfterSeconds: allowed ? 0 : Math.ceil((1 - bucket.tokens) / policy.perSecond)
      }
    }
    return RateLimiter.of({
      take: (policy, key) => Effect.map(Clock.currentTimeMillis, (now) => decide(policy, key, now, true)),
      peek: (policy, key) => Effect.map(Clock.currentTimeMillis, (now) => decide(policy, key, now, false))
    })
  })
}

/**
 * The headers of draft-ietf-httpapi-ratelimit-headers-10: `RateLimit-Policy` names the quota
 * (`q` requests per `w` seconds), `RateLimit` what is left (`r`) and when it is whole again (`t`).
 */
export const rateLimitHeaders = ({ policy, remaining, resetSeconds, retryAfterSeconds }: RateLimitDecision) => ({
  "ratelimit-policy": `"${policy.name}";q=${policy.burst};w=${Math.ceil(policy.burst / policy.perSecond)}`,
  ratelimit: `"${policy.name}";r=${remaining};t=${resetSeconds}`,
  ...(retryAfterSeconds > 0 ? { "retry-after": String(retryAfterSeconds) } : {})
})

/** The last rate-limit decision about each request being served, for its response headers. */
const decisions = new WeakMap<HttpServerRequest.HttpServerRequest, RateLimitDecision>()

export const noteRateLimit = (request: HttpServerRequest.HttpServerRequest, decision: RateLimitDecision) => {
  decisions.set(request, decision)
}

export const rateLimitOf = (request: HttpServerRequest.HttpServerRequest): RateLimitDecision | undefined =>
  decisions.get(request)
