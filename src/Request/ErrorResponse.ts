import { Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import { type ApiError, errorBodies } from "../Domain/ApiError.js"

/** An error as its declared body and status, for answers given outside an endpoint. */
export const errorResponse = (error: ApiError, headers: Record<string, string> = {}) =>
  HttpServerResponse.jsonUnsafe(
    // The tag picks the body schema of this very class, a pairing TypeScript's union of schemas cannot follow.
    Schema.encodeSync(errorBodies[error._tag] as unknown as Schema.Codec<ApiError, unknown>)(error),
    { status: error.status, headers }
  )
