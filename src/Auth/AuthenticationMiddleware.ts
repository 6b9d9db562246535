import { Effect, Layer, Option } from "effect"
import { Authentication } from "../Api/Authentication.js"
import { AppConfig } from "../Config/AppConfig.js"
import { TooManyRequests, Unauthorized } from "../Domain/ApiError.js"
import { countFailedAuthentication, countRateLimited } from "../Observability/Metrics.js"
import { type RequestState, withCurrentRequest } from "../Request/CurrentRequest.js"
import { ApiKeys, hashKey, type KeyHolder } from "./ApiKeys.js"
import { noteRateLimit, RateLimiter, type RateLimitPolicy } from "./RateLimiter.js"

const bearer = /^bearer +([\x21-\x7e]+) *$/i

// Made once: an error captures a stack trace when it is created, which is costly on every 401.
const missingKey = new Unauthorized({
  code: "missing_api_key",
  message: "Authorization: an API key is required, as \"Bearer <API key>\"",
  status: 401
})
const malformedKey = new Unauthorized({
  code: "invalid_api_key",
  message: "Authorization: must be \"Bearer <API key>\"",
  status: 401
})
const unknownKey = new Unauthorized({
  code: "invalid_api_key",
  message: "Authorization: the API key is unknown or revoked",
  status: 401
})

/** RFC 6750: a 401 names the realm, and the error when a key was sent. */
const noKeyChallenge = { "www-authenticate": `Bearer realm="petstore"` }
const refusedKeyChallenge = { "www-authenticate": `Bearer realm="petstore", error="invalid_token"` }

const rateLimited = (message: string) => new TooManyRequests({ code: "rate_limited", message, status: 429 })
const tooManyFailures = rateLimited(
  "Too many failed authentications from this address; retry after the Retry-After seconds"
)
const overRate = rateLimited("This API key is over its request rate; retry after the Retry-After seconds")

/** Once half the allowed failures are spent, each further 401 waits 200 ms longer, up to 2 s. */
const slowdown = (policy: RateLimitPolicy, remaining: number) =>
  Math.min(2000, Math.max(0, Math.floor(policy.burst / 2) - remaining) * 200)

/**
 * Authenticates by the key's SHA-256 hash; the key itself is never logged nor compared. A valid
 * key's requests count against its own rate only: what other clients sent from the same address
 * never refuses it. Failed attempts count against the client's address (`Request/ClientAddress.ts`:
 * the peer, or the client a trusted proxy names): slowed once half the allowance is spent, then
 * 429, so keys cannot be guessed at speed. The 401's challenge and the rate limit headers are
 * noted on the request's record, and leave with the response (`Http/ResponseHeaders.ts`).
 */
export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    const limiter = yield* RateLimiter
    const { authFailuresPerMinute, rateLimit } = yield* AppConfig
    const perKey: RateLimitPolicy = { name: "per-key", ...rateLimit }
    const failedAuthentication: RateLimitPolicy = {
      name: "failed-authentication",
      perSecond: authFailuresPerMinute / 60,
      burst: authFailuresPerMinute
    }

    const refuse = (
      current: RequestState,
      error: Unauthorized
    ): Effect.Effect<never, Unauthorized | TooManyRequests> =>
      Effect.flatMap(limiter.take(failedAuthentication, current.clientAddress.limitedAs), (
        decision
      ): Effect.Effect<never, Unauthorized | TooManyRequests> => {
        if (!decision.allowed) {
          countRateLimited(failedAuthentication.name)
          noteRateLimit(current, decision)
          return Effect.fail(tooManyFailures)
        }
        countFailedAuthentication(error.code)
        current.noteResponseHeaders(error === missingKey ? noKeyChallenge : refusedKeyChallenge)
        // The policy the limiter applied: a worker's share of it when several share a machine.
        const wait = slowdown(decision.policy, decision.remaining)
        const failed = Effect.fail(error)
        return wait === 0 ? failed : Effect.zipRight(Effect.sleep(wait), failed)
      })

    const authenticate = (
      current: RequestState
    ): Effect.Effect<KeyHolder, Unauthorized | TooManyRequests> => {
      const header = current.request.headers.authorization
      if (header === undefined || header.trim() === "") return refuse(current, missingKey)
      const token = bearer.exec(header)?.[1]
      if (token === undefined) return refuse(current, malformedKey)
      return Effect.flatMap(
        keys.findActiveByHash(hashKey(token)),
        (holder): Effect.Effect<KeyHolder, Unauthorized | TooManyRequests> => {
          if (Option.isNone(holder)) return refuse(current, unknownKey)
          return Effect.flatMap(limiter.take(perKey, String(holder.value.keyId)), (decision) => {
            noteRateLimit(current, decision)
            if (decision.allowed) return Effect.succeed(holder.value)
            countRateLimited(perKey.name)
            return Effect.fail(overRate)
          })
        }
      )
    }

    return Authentication.of({
      // The platform's own bearer parsing is case-sensitive; the header is read here instead.
      bearer: () => withCurrentRequest(authenticate)
    })
  })
)
