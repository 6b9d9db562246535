import { HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { Unauthorized } from "../Domain/ApiError.js"
import { ApiKeys, hashKey } from "./ApiKeys.js"
import { Authentication } from "./Authentication.js"

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

/**
 * Authenticates by the key's SHA-256 hash; the key itself is never logged nor compared. The 401's
 * challenge header is added with its body (`Http/ApiResponses.ts`).
 */
export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    return Authentication.of({
      // The platform's own bearer parsing is case-sensitive; the header is read here instead.
      bearer: () =>
        Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
          const header = request.headers.authorization
          if (header === undefined || header.trim() === "") return Effect.fail(missingKey)
          const token = bearer.exec(header)?.[1]
          if (token === undefined) return Effect.fail(malformedKey)
          return Effect.flatMap(
            keys.findActiveByHash(hashKey(token)),
            Option.match({ onNone: () => Effect.fail(unknownKey), onSome: Effect.succeed })
          )
        })
    })
  })
)
