import { Context } from "effect"
import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "effect/http-api"
import { errorBodies } from "../Domain/ApiError.js"

/** The API key a request was authenticated with, provided to handlers by `Authentication`. */
export class CurrentCaller extends Context.Service<CurrentCaller, { readonly keyId: number; readonly name: string }>()(
  "petstore/CurrentCaller"
) {}

/** Bearer authentication, before decoding (a caller without a key learns nothing), and the rate limits (429). */
export class Authentication extends HttpApiMiddleware.Service<Authentication, { provides: CurrentCaller }>()(
  "Authentication",
  {
    // 503 when the key store or the shared rate limits cannot answer.
    error: [errorBodies.Unauthorized, errorBodies.TooManyRequests, errorBodies.ServiceUnavailable],
    security: {
      // The scheme as the document has always named it; requests may spell it in any case.
      bearer: HttpApiSecurity.http({ scheme: "bearer" }).pipe(
        HttpApiSecurity.annotate(OpenApi.Description, "An API key, sent as `Authorization: Bearer <API_KEY>`.")
      )
    }
  }
) {}
