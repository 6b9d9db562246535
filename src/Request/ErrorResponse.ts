import { Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import { type ApiError, errorBodies } from "../Domain/ApiError.js"

/**
 * The response of an error, its wire body encoded by the schema the API declares it with
 * (`Domain/ApiError.ts`), under its own status: for the answers given outside an endpoint's own
 * encoding of its errors (an unknown route, the deadline, a draining server, a refused key).
 */
export const errorResponse = (error: ApiError, headers: Record<string, string> = {}) =>
  HttpServerResponse.jsonUnsafe(
    // The tag picks the body schema of this very class, a pairing TypeScript's union of schemas cannot follow.
    Schema.encodeSync(errorBodies[error._tag] as unknown as Schema.Codec<ApiError, unknown>)(error),
    { status: error.status, headers }
  )
