import { HttpApiMiddleware } from "effect/http-api"
import { GoneBody } from "../Domain/ApiError.js"

/** When getPet was deprecated (RFC 9745 `Deprecation`) and when it is removed (RFC 8594 `Sunset`). */
export const getPetDeprecatedAt = new Date("2026-01-01T00:00:00Z")
export const getPetSunsetAt = new Date("2030-12-05T00:00:00Z")

/** Where the docs page shows getPet's replacement, listPets: Scalar's fragment, `tag/<tag>/<method><path>`, method in lower case. */
export const getPetReplacementFragment = "#tag/pets/get/v1/pets"

/**
 * Marks every response of a deprecated endpoint with `Deprecation`, `Sunset` and a `Link` to the
 * documentation of its replacement, and answers 410 from the sunset on. It wraps authentication,
 * so even a caller without a key learns of the deprecation.
 */
export class SunsetPolicy extends HttpApiMiddleware.Service<SunsetPolicy>()("SunsetPolicy", {
  error: GoneBody
}) {}
