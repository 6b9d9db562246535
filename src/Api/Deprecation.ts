import { HttpApiMiddleware } from "effect/http-api"
import { errorBodies } from "../Domain/ApiError.js"

/** When getPet was deprecated (RFC 9745 `Deprecation`) and when it is removed (RFC 8594 `Sunset`). */
export const getPetDeprecatedAt = new Date("2026-01-01T00:00:00Z")
export const getPetSunsetAt = new Date("2030-12-05T00:00:00Z")

/** getPet's replacement, listPets, on the docs page: Scalar's `tag/<tag>/<method><path>`, method in lower case. */
export const getPetReplacementFragment = "#tag/pets/get/v1/pets"

/** `Deprecation`, `Sunset` and a `Link` to the replacement on every response; 410 from the sunset. */
export class SunsetPolicy extends HttpApiMiddleware.Service<SunsetPolicy>()("SunsetPolicy", {
  error: errorBodies.Gone
}) {}
