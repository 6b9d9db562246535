import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { TooManyRequestsBody, UnauthorizedBody } from "../Domain/ApiError.js"
import { CurrentCaller } from "../Domain/Caller.js"

/**
 * Bearer authentication for every `/v1` operation. It runs before the request is decoded, so a
 * caller without a valid key learns nothing about its request. It also holds the rate limits: per
 * API key, and of failed authentications per client address (429 `rate_limited`).
 */
export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("Authentication", {
  failure: Schema.Union(UnauthorizedBody, TooManyRequestsBody),
  provides: CurrentCaller,
  security: {
    bearer: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(OpenApi.Description, "An API key, sent as `Authorization: Bearer <API_KEY>`.")
    )
  }
}) {}
