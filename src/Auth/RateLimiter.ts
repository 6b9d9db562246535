import { Context, Effect, Layer } from "effect"
import type { RequestState } from "../Request/CurrentRequest.js"
import { RecentMap } from "./RecentMap.js"

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

/** Buckets kept in one process per policy; past this many, the least recently used are forgotten. */
export const defaultMaxBuckets = 100_000

/**
 * Token buckets by key. Each decision takes one request from a bucket; the failed-authentication
 * policy is taken only by requests that failed, so other clients' failures never refuse a valid
 * key.
 */
export class RateLimiter extends Context.Tag("petstore/RateLimiter")<
  RateLimiter,
  {
    readonly take: (policy: RateLimitPolicy, key: string) => Effect.Effect<RateLimitDecision>
  }
>() {
  /**
   * Buckets in this process's memory. Idle buckets are forgotten once they would be full again
   * (the same as none), and at most `maxBuckets` per policy are kept (least recently used first),
   * so a flood of new addresses costs bounded memory.
   */
  static readonly inMemory = (options: { readonly maxBuckets?: number } = {}) =>
    Layer.sync(RateLimiter, () => {
      // A bucket is one number, the time it is full again if nothing is taken: its tokens follow
      // from it and the policy, and from then on it is the same as no bucket. Each policy has its
      // own map, keyed by the caller's own string, so a flood of new addresses costs a map entry
      // each and no object or string besides.
      const byPolicy = new Map<string, RecentMap<number>>()
      const bucketsOf = (policy: RateLimitPolicy) => {
        let fullAt = byPolicy.get(policy.name)
        if (fullAt === undefined) {
          fullAt = new RecentMap<number>(options.maxBuckets ?? defaultMaxBuckets, (at, now) => at <= now)
          byPolicy.set(policy.name, fullAt)
        }
        return fullAt
      }
      const decide = (policy: RateLimitPolicy, key: string, now: number): RateLimitDecision => {
        const fullAt = bucketsOf(policy)
        const at = fullAt.get(key)
        let tokens = at === undefined || at <= now ? policy.burst : policy.burst - ((at - now) / 1000) * policy.perSecond
        const allowed = tokens >= 1
        if (allowed) tokens -= 1
        fullAt.set(key, now + ((policy.burst - tokens) / policy.perSecond) * 1000, now)
        return decision(policy, allowed, Math.max(0, tokens))
      }
      return RateLimiter.of({
        take: (policy, key) => Effect.clockWith((clock) => Effect.succeed(decide(policy, key, clock.unsafeCurrentTimeMillis())))
      })
    })

  static readonly InMemory = RateLimiter.inMemory()

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
      return Context.make(RateLimiter, RateLimiter.of({ take: (policy, key) => whole.take(share(policy), key) }))
    })
}

export const decision = (policy: RateLimitPolicy, allowed: boolean, tokens: number): RateLimitDecision => ({
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
export const noteRateLimit = (state: RequestState, decision: RateLimitDecision) =>
  state.noteResponseHeaders(rateLimitHeaders(decision))
