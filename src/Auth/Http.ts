import { HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { Unauthorized } from "../Domain/ApiError.js"
import { ApiKeys, hashKey } from "./ApiKeys.js"
import { Authentication } from "./Authentication.js"

const bearer = /^bearer +([\x21-\x7e]+) *$/i

/** RFC 6750: the challenge names the realm, and the error when a token was sent. */
const challenge = (tokenSent: boolean) =>
  HttpApp.appendPreResponseHandler((_request, response) =>
    Effect.succeed(
      HttpServerResponse.setHeader(
        response,
        "www-authenticate",
        tokenSent ? `Bearer realm="petstore", error="invalid_token"` : `Bearer realm="petstore"`
      )
    )
  )

const reject = (code: Unauthorized["code"], message: string) =>
  challenge(code !== "missing_api_key").pipe(
    Effect.zipRight(Effect.fail(new Unauthorized({ code, message, status: 401 })))
  )

/** Authenticates by the key's SHA-256 hash; the key itself is never logged nor compared. */
export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    return Authentication.of({
      // The platform's own bearer parsing is case-sensitive; the header is read here instead.
      bearer: () =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const header = request.headers.authorization
          if (header === undefined || header.trim() === "") {
            return yield* reject("missing_api_key", "Authorization: an API key is required, as \"Bearer <API key>\"")
          }
          const token = bearer.exec(header)?.[1]
          if (token === undefined) {
            return yield* reject("invalid_api_key", "Authorization: must be \"Bearer <API key>\"")
          }
          const holder = yield* keys.findActiveByHash(hashKey(token))
          if (Option.isNone(holder)) {
            return yield* reject("invalid_api_key", "Authorization: the API key is unknown or revoked")
          }
          return holder.value
        })
    })
  })
)
