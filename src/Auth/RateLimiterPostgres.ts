import { Clock, Deferred, type Duration, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { DatabaseUnavailable } from "../Domain/DatabaseUnavailable.js"
import { readAtScrape } from "../Observability/Metrics.js"
import { ObservabilityConfig } from "../Observability/ObservabilityConfig.js"
import { waitingOnDatabase } from "../Request/Unavailable.js"
import { unavailableOrDie } from "../Sql/DatabaseErrors.js"
import { decision, defaultMaxBuckets, makeInMemory, RateLimiter, type RateLimitPolicy } from "./RateLimiter.js"
import { RecentMap } from "./RecentMap.js"

/** Tokens an instance leases from a shared bucket at once, a tenth of the burst: one request in this many writes. */
export const leaseSize = (policy: RateLimitPolicy): number => Math.max(1, Math.floor(policy.burst / 10))

/** What this instance holds of a shared bucket: unspent leased tokens, the shared count and time of the last lease. */
interface Lease {
  tokens: number
  sharedTokens: number
  sharedAt: number
  emptyUntil: number
  pending: Deferred.Deferred<void> | undefined
}

/**
 * Shared buckets, no write per request: tokens leased in batches under a row lock, spent in memory, never past policy.
 * Writes refused (so reads too): each decides alone (logged, `petstore_rate_limit_local` 1), retrying each second.
 */
export const RateLimiterPostgres = (
  options: { readonly maxSharedBuckets?: number; readonly purgeEvery?: Duration.Input } = {}
) =>
  Layer.effect(
    RateLimiter,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const maxShared = options.maxSharedBuckets ?? 1_000_000
      const local = makeInMemory()
      let localUntil = 0
      let localSince: number | undefined
      const observability = yield* Effect.serviceOption(ObservabilityConfig)
      const aloneHelp =
        "1 while this instance decides rate limits alone because the shared buckets in PostgreSQL cannot be written, else 0"
      if (Option.exists(observability, ({ metrics }) => Option.isSome(metrics))) {
        yield* readAtScrape("gauge", "petstore_rate_limit_local", aloneHelp, {}, () => localSince === undefined ? 0 : 1)
      }
      const decideLocally = (error: DatabaseUnavailable, now: number) => {
        localUntil = now + 1000
        if (localSince !== undefined) return Effect.void
        localSince = now
        return Effect.logWarning("rate limits decided locally: the shared buckets cannot be written").pipe(
          Effect.annotateLogs({ reason: error.message })
        )
      }
      const sharedAgain = (now: number) => {
        if (localSince === undefined) return Effect.void
        const seconds = (now - localSince) / 1000
        localSince = undefined
        return Effect.logInfo("rate limits shared again").pipe(Effect.annotateLogs({ localSeconds: seconds }))
      }

      // A lease dropped with tokens unspent refuses its client up to one lease early, as another instance's would.
      const leases = new RecentMap<Lease>(
        defaultMaxBuckets,
        (lease, now) => lease.pending === undefined && lease.emptyUntil <= now && lease.tokens < 1
      )

      const refill = (policy: RateLimitPolicy, bucket: string, lease: Lease, now: number) =>
        Effect.gen(function*() {
          const want = leaseSize(policy)
          const perMilli = policy.perSecond / 1000
          // Only the policy's numbers are in the text: one prepared statement per policy.
          const refilledText =
            `LEAST(${policy.burst}::float8, b.tokens + GREATEST(0, excluded.updated_at - b.updated_at) * ${perMilli}::float8)`
          const refilled = sql.literal(refilledText)
          const granted = sql.literal(`LEAST(FLOOR(${refilledText}), ${want})::int`)
          const done = yield* Deferred.make<void>()
          lease.pending = done
          const row = yield* sql<{ granted: number; tokens: number }>`
            INSERT INTO rate_limit_buckets AS b (bucket, tokens, allowed, granted, updated_at, full_at)
            VALUES (${bucket}, ${policy.burst - want}, true, ${want}, ${now}, ${now + Math.ceil(want / perMilli)})
            ON CONFLICT (bucket) DO UPDATE SET
              granted = ${granted},
              tokens = ${refilled} - ${granted},
              allowed = ${granted} >= 1,
              updated_at = GREATEST(b.updated_at, excluded.updated_at),
              full_at = ${now}::bigint + CEIL((${policy.burst} - (${refilled} - ${granted})) / ${perMilli}::float8)::bigint
            RETURNING granted, tokens`.pipe(
            Effect.map(([row]) => row!),
            unavailableOrDie,
            Effect.ensuring(
              Effect.andThen(Effect.sync(() => (lease.pending = undefined)), Deferred.succeed(done, undefined))
            )
          )
          lease.tokens += row.granted
          lease.sharedTokens = row.tokens
          lease.sharedAt = now
          lease.emptyUntil = row.granted === 0 ? now + Math.ceil(((1 - row.tokens) / policy.perSecond) * 1000) : 0
        })

      /** The shared bucket's tokens now as far as this instance knows, plus what it holds. */
      const estimate = (policy: RateLimitPolicy, lease: Lease, now: number) =>
        Math.min(policy.burst, lease.tokens + lease.sharedTokens + ((now - lease.sharedAt) / 1000) * policy.perSecond)

      const take = (policy: RateLimitPolicy, key: string, now: number): ReturnType<RateLimiter["Service"]["take"]> => {
        if (now < localUntil) return local.take(policy, key)
        const bucket = `${policy.name}:${key}`
        let lease = leases.get(bucket)
        if (lease !== undefined) {
          if (lease.tokens >= 1) {
            lease.tokens -= 1
            return Effect.succeed(decision(policy, true, estimate(policy, lease, now)))
          }
          if (now < lease.emptyUntil) return Effect.succeed(decision(policy, false, estimate(policy, lease, now)))
          if (lease.pending !== undefined) {
            return Effect.andThen(
              waitingOnDatabase(Deferred.await(lease.pending)),
              Effect.suspend(() => take(policy, key, now))
            )
          }
        } else {
          lease = { tokens: 0, sharedTokens: policy.burst, sharedAt: now, emptyUntil: 0, pending: undefined }
          leases.set(bucket, lease, now)
        }
        return Effect.matchEffect(waitingOnDatabase(refill(policy, bucket, lease, now)), {
          onFailure: (error) =>
            error.reason === "read_only" || error.reason === "full"
              ? Effect.andThen(decideLocally(error, now), local.take(policy, key))
              : Effect.fail(error),
          onSuccess: () => Effect.andThen(sharedAgain(now), Effect.suspend(() => take(policy, key, now)))
        })
      }

      const purge = Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.andThen(
          sql`DELETE FROM rate_limit_buckets WHERE full_at <= ${now}`,
          sql`DELETE FROM rate_limit_buckets WHERE bucket IN (
            SELECT bucket FROM rate_limit_buckets ORDER BY updated_at DESC OFFSET ${maxShared})`
        ))
      // Every instance, a turn after its start; a failed purge is retried the next turn.
      yield* Effect.sleep(options.purgeEvery ?? "10 seconds").pipe(
        Effect.andThen(Effect.ignoreCause(purge, { log: "Debug" })),
        Effect.forever,
        Effect.forkScoped
      )

      return RateLimiter.of({
        take: (policy, key) => Effect.flatMap(Clock.currentTimeMillis, (now) => take(policy, key, now))
      })
    })
  )
