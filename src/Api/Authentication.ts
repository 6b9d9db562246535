import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "effect/http-api"
import { ServiceUnavailableBody, TooManyRequestsBody, UnauthorizedBody } from "../Domain/ApiError.js"
import type { CurrentCaller } from "../Domain/Caller.js"

/**
 * Bearer authentication for every `/v1` operation. It runs before the request is decoded, so a
 * caller without a valid key learns nothing about its request. It also holds the rate limits: per
 * API key, and of failed authentications per client address (429 `rate_limited`).
 */
export class Authentication extends HttpApiMiddleware.Service<Authentication, { provides: CurrentCaller }>()(
  "Authentication",
  {
    // 503 when the key store or the shared rate limits cannot answer.
    error: [UnauthorizedBody, TooManyRequestsBody, ServiceUnavailableBody],
    security: {
      // The scheme as the document has always named it; requests may spell it in any case.
      bearer: HttpApiSecurity.http({ scheme: "bearer" }).pipe(
        HttpApiSecurity.annotate(OpenApi.Description, "An API key, sent as `Authorization: Bearer <API_KEY>`.")
      )
    }
  }
) {}
