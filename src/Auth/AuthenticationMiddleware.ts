import { Context, Effect, Exit, Layer, Option } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { Authentication, CurrentCaller } from "../Api/Authentication.js"
import { AppConfig } from "../Config/AppConfig.js"
import { codesOf, TooManyRequests, Unauthorized } from "../Domain/ApiError.js"
import type { DatabaseUnavailable } from "../Domain/DatabaseUnavailable.js"
import { failedAuthenticationCounter, rateLimitedCounter } from "../Observability/Metrics.js"
import { inSampledSpan } from "../Observability/Tracing.js"
import { type ClientAddress, makeClientAddress } from "../Request/ClientAddress.js"
import { CurrentRequest, noteResponseHeaders, type RequestRecord } from "../Request/CurrentRequest.js"
import { errorResponse } from "../Request/ErrorResponse.js"
import { orUnavailable } from "../Request/Unavailable.js"
import { ApiKeys, hashKey } from "./ApiKeys.js"
import { RateLimiter, rateLimitHeaders, type RateLimitPolicy } from "./RateLimiter.js"

const bearer = /^bearer +([\x21-\x7e]+) *$/i

type Answer<E> = Effect.Effect<
  CurrentCaller["Service"] | HttpServerResponse.HttpServerResponse,
  E,
  HttpServerRequest.HttpServerRequest
>

/** Made once, not failed through HttpApi, which would encode it at every request; with RFC 6750's challenge. */
const refusal = (code: Unauthorized["code"], message: string) => ({
  code,
  response: errorResponse(new Unauthorized({ code, message, status: 401 }), {
    "www-authenticate": code === "missing_api_key"
      ? `Bearer realm="petstore"`
      : `Bearer realm="petstore", error="invalid_token"`
  })
})
const missingKey = refusal("missing_api_key", "Authorization: an API key is required, as \"Bearer <API key>\"")
const malformedKey = refusal("invalid_api_key", "Authorization: must be \"Bearer <API key>\"")
const unknownKey = refusal("invalid_api_key", "Authorization: the API key is unknown or revoked")

const rateLimited = (message: string) =>
  errorResponse(new TooManyRequests({ code: "rate_limited", message, status: 429 }))
const tooManyFailures = rateLimited(
  "Too many failed authentications from this address; retry after the Retry-After seconds"
)
const overRate = rateLimited("This API key is over its request rate; retry after the Retry-After seconds")

/** A refusal answered ends the authentication span failed, as a failure would. */
const inAuthenticationSpan = inSampledSpan(
  "authenticate",
  { "code.function.name": "Authentication.bearer" },
  (exit) =>
    Exit.isSuccess(exit) && HttpServerResponse.isHttpServerResponse(exit.value)
      ? Exit.fail(new Error(`answered ${exit.value.status}`))
      : exit
)

/**
 * By the key's SHA-256 hash, never logging the key. A valid key counts against its own rate only; failures against the
 * client's address (peer, or the client a trusted proxy names): slowed, then 429, so keys cannot be guessed fast.
 */
export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    const limiter = yield* RateLimiter
    const { authFailuresPerMinute, rateLimit, trustedProxies } = yield* AppConfig
    const perKey: RateLimitPolicy = { name: "per-key", ...rateLimit }
    const failedAuthentication: RateLimitPolicy = {
      name: "failed-authentication",
      perSecond: authFailuresPerMinute / 60,
      burst: authFailuresPerMinute
    }
    // Every policy and every 401 code counted from 0, so an alert on their rate sees the first refusal.
    const countOverRate = rateLimitedCounter(perKey.name)
    const countTooManyFailures = rateLimitedCounter(failedAuthentication.name)
    const countFailure = new Map(codesOf(Unauthorized).map((code) => [code, failedAuthenticationCounter(code)]))
    const clientAddressOf = makeClientAddress(trustedProxies)
    const refuse = (client: ClientAddress, { code, response }: ReturnType<typeof refusal>) =>
      Effect.flatMap(limiter.take(failedAuthentication, client.limitedAs), (decision) => {
        if (!decision.allowed) {
          countTooManyFailures()
          return Effect.succeed(HttpServerResponse.setHeaders(tooManyFailures, rateLimitHeaders(decision)))
        }
        countFailure.get(code)?.()
        // Once half the allowed failures are spent, each 401 waits 200 ms longer, up to 2 s; by the policy applied,
        // a worker's share of it when several share a machine.
        const wait = Math.min(2000, Math.max(0, Math.floor(decision.policy.burst / 2) - decision.remaining) * 200)
        return wait === 0 ? Effect.succeed(response) : Effect.as(Effect.sleep(wait), response)
      })

    /** The caller's key holder, or the answer refusing it; the client's address is read only for a refusal. */
    const authenticate = (
      request: HttpServerRequest.HttpServerRequest,
      current: RequestRecord | undefined
    ): Answer<DatabaseUnavailable> => {
      const client = () => current?.clientAddress ?? clientAddressOf(request)
      const header = request.headers.authorization
      if (header === undefined || header.trim() === "") return refuse(client(), missingKey)
      const token = bearer.exec(header)?.[1]
      if (token === undefined) return refuse(client(), malformedKey)
      return Effect.flatMap(keys.findActiveByHash(hashKey(token)), (holder): Answer<DatabaseUnavailable> => {
        if (Option.isNone(holder)) return refuse(client(), unknownKey)
        return Effect.flatMap(limiter.take(perKey, String(holder.value.keyId)), (decision): Answer<never> => {
          const headers = rateLimitHeaders(decision)
          if (decision.allowed) return Effect.as(noteResponseHeaders(headers), holder.value)
          countOverRate()
          return Effect.succeed(HttpServerResponse.setHeaders(overRate, headers))
        })
      })
    }

    return Authentication.of({
      // Read here, not by the security scheme's decoding, which cannot tell a missing key from a malformed one.
      bearer: (httpEffect) =>
        Effect.withFiber((fiber) => {
          const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
          const current = fiber.getRef(CurrentRequest)
          // A sampled request's authentication is a span of its trace; never the key, nor the header.
          return Effect.flatMap(inAuthenticationSpan(orUnavailable(authenticate(request, current))), (answer) =>
            HttpServerResponse.isHttpServerResponse(answer)
              ? Effect.succeed(answer)
              : Effect.provideService(httpEffect, CurrentCaller, answer))
        })
    })
  })
)
