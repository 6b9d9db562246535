import { Context, Effect, Layer } from "effect"
import type { DatabaseUnavailable } from "../Domain/DatabaseUnavailable.js"
import { RecentMap } from "./RecentMap.js"

/** A token bucket: `burst` requests at once, refilled at `perSecond`. */
export interface RateLimitPolicy {
  readonly name: string
  readonly perSecond: number
  readonly burst: number
}

export type RateLimitDecision = ReturnType<typeof decision>

/** Buckets kept in one process per policy; past this many, the least recently used are forgotten. */
export const defaultMaxBuckets = 100_000

/**
 * Token buckets by key. Not `effect/persistence`'s RateLimiter: its store takes the tokens asked or none (no lease of
 * "up to n" in one trip), has no SQL store, and its memory store keeps every key forever; `RecentMap` bounds a flood.
 */
export class RateLimiter extends Context.Service<RateLimiter, {
  readonly take: (policy: RateLimitPolicy, key: string) => Effect.Effect<RateLimitDecision, DatabaseUnavailable>
}>()("petstore/RateLimiter") {
  /** Buckets in this process's memory, forgotten once full again. */
  static readonly inMemory = (options: { readonly maxBuckets?: number } = {}) =>
    Layer.sync(RateLimiter, () => makeInMemory(options))

  static readonly InMemory = RateLimiter.inMemory()

  /** A share of each policy per worker on one SQLite file: buckets in SQLite would make every request a write. */
  static readonly InMemoryShare = (workers: number) =>
    Layer.sync(RateLimiter, () => {
      const whole = makeInMemory()
      const share = (policy: RateLimitPolicy): RateLimitPolicy => ({
        ...policy,
        perSecond: policy.perSecond / workers,
        burst: Math.max(1, Math.floor(policy.burst / workers))
      })
      return RateLimiter.of({ take: (policy, key) => whole.take(share(policy), key) })
    })
}

export const makeInMemory = (options: { readonly maxBuckets?: number } = {}): RateLimiter["Service"] => {
  // A bucket is one number, when it is full again: no object per address.
  const byPolicy = new Map<string, RecentMap<number>>()
  const decide = (policy: RateLimitPolicy, key: string, now: number): RateLimitDecision => {
    let fullAt = byPolicy.get(policy.name)
    if (fullAt === undefined) {
      fullAt = new RecentMap<number>(options.maxBuckets ?? defaultMaxBuckets, (at, now) => at <= now)
      byPolicy.set(policy.name, fullAt)
    }
    const at = fullAt.get(key)
    let tokens = at === undefined || at <= now ? policy.burst : policy.burst - ((at - now) / 1000) * policy.perSecond
    const allowed = tokens >= 1
    if (allowed) tokens -= 1
    fullAt.set(key, now + ((policy.burst - tokens) / policy.perSecond) * 1000, now)
    return decision(policy, allowed, Math.max(0, tokens))
  }
  return {
    take: (policy, key) =>
      Effect.clockWith((clock) => Effect.succeed(decide(policy, key, clock.currentTimeMillisUnsafe())))
  }
}

/** The outcome of taking one request from a bucket: requests left, seconds until full, seconds until one is allowed. */
export const decision = (policy: RateLimitPolicy, allowed: boolean, tokens: number) => ({
  allowed,
  policy,
  remaining: Math.floor(tokens),
  resetSeconds: Math.ceil((policy.burst - tokens) / policy.perSecond),
  retryAfterSeconds: allowed ? 0 : Math.ceil((1 - tokens) / policy.perSecond)
})

/** draft-ietf-httpapi-ratelimit-headers-10: the quota (`q` per `w` seconds), what is left (`r`), when whole (`t`). */
export const rateLimitHeaders = ({ policy, remaining, resetSeconds, retryAfterSeconds }: RateLimitDecision) => ({
  "ratelimit-policy": `"${policy.name}";q=${policy.burst};w=${Math.ceil(policy.burst / policy.perSecond)}`,
  ratelimit: `"${policy.name}";r=${remaining};t=${resetSeconds}`,
  ...(retryAfterSeconds > 0 ? { "retry-after": String(retryAfterSeconds) } : {})
})
