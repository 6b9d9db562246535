import { flow, Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, OpenApi } from "effect/http-api"
import { errorBodies } from "../Domain/ApiError.js"
import { DecimalIntFromString, NewPet, newPetParseOptions, Pet, Pets, PetStatus } from "../Domain/Pet.js"
import { Authentication } from "./Authentication.js"
import { docsPath } from "./DocumentPaths.js"
import { withParameterSchemas, withResponseHeaders } from "./OpenApiDocument.js"
import { SchemaErrors } from "./SchemaErrors.js"

/** When getPet was deprecated (RFC 9745 `Deprecation`) and when it is removed (RFC 8594 `Sunset`). */
const getPetDeprecatedAt = new Date("2026-01-01T00:00:00Z")
export const getPetSunsetAt = new Date("2030-12-05T00:00:00Z")

/** getPet's headers; `Link` is listPets on the docs page: Scalar's `tag/<tag>/<method><path>`, method in lower case. */
export const getPetSunsetHeaders = (baseUrl: string) => ({
  deprecation: `@${Math.floor(getPetDeprecatedAt.getTime() / 1000)}`,
  sunset: getPetSunsetAt.toUTCString(),
  link: `<${baseUrl}${docsPath}#tag/pets/get/v1/pets>; rel="deprecation"; type="text/html"`
})
const exampleSunsetHeaders = getPetSunsetHeaders("https://petstore.example.com")

/** `Deprecation`, `Sunset` and a `Link` to the replacement on every response; 410 from the sunset. */
export class SunsetPolicy extends HttpApiMiddleware.Service<SunsetPolicy>()("SunsetPolicy", {
  error: errorBodies.Gone
}) {}

export const defaultLimit = 20

const limitMessage = "must be an integer from 1 to 100"
const limitDescription = `Maximum number of animals returned, 1 to 100; ${defaultLimit} when absent.`

export const ListPetsParams = Schema.Struct({
  limit: Schema.optionalKey(
    DecimalIntFromString(limitMessage, Schema.isBetween({ minimum: 1, maximum: 100 }, { message: limitMessage }))
      .annotate({ description: limitDescription })
  ),
  status: Schema.optionalKey(PetStatus.annotate({ description: "Return only animals with this status." })),
  cursor: Schema.optionalKey(Schema.String.annotate({
    description: "Opaque position from the `Link: rel=\"next\"` header of the previous page.",
    examples: ["MjAuYXZhaWxhYmxl.x8KfQ2m1bV0sZ3pTnE4yLw"]
  }))
})

const idempotencyKeyMessage = "must be 1 to 255 printable ASCII characters"

export const CreatePetHeaders = Schema.Struct({
  "idempotency-key": Schema.optionalKey(
    Schema.String.annotate({
      description: "Makes a retried create safe: the same key with the same body returns the first answer and " +
        "creates nothing. Kept at least 24 hours, per API key.",
      examples: ["8e0f6a2c-create-rex"],
      message: idempotencyKeyMessage
    }).check(Schema.isPattern(/^[\x20-\x7e]{1,255}$/u, { message: idempotencyKeyMessage }))
  )
})

const petIdDescription = "Identifier of the animal to retrieve."

export const GetPetPath = Schema.Struct({
  petId: DecimalIntFromString(
    "must be a decimal integer in the safe range, written canonically (no +, no leading zeros, no -0)"
  ).annotate({ description: petIdDescription })
})

export const listPets = HttpApiEndpoint.get("listPets", "/pets", {
  query: ListPetsParams,
  success: Pets,
  error: [errorBodies.BadRequest, errorBodies.ServiceUnavailable, errorBodies.InternalError]
})
  .annotate(OpenApi.Summary, "List animals")
  .annotate(
    OpenApi.Transform,
    flow(
      // Written as text in the query string, but an integer to every client.
      withParameterSchemas({
        limit: {
          type: "integer",
          minimum: 1,
          maximum: 100,
          default: defaultLimit,
          examples: [defaultLimit],
          description: limitDescription
        }
      }),
      withResponseHeaders({
        "200": {
          Link: [
            "The next page, when more animals match: an absolute URL keeping limit and status, with a cursor.",
            "<https://petstore.example.com/v1/pets?limit=20&status=available&cursor=MjAu.x8Kf>; rel=\"next\""
          ]
        },
        "503": { "Retry-After": ["Seconds after which the request may be retried.", "1"] }
      })
    )
  )
  .annotate(
    OpenApi.Description,
    "Returns animals in ascending id order, optionally filtered by status. When more animals match, " +
      "the response carries `Link: <url>; rel=\"next\"` pointing at the next page."
  )

export const createPet = HttpApiEndpoint.post("createPet", "/pets", {
  payload: NewPet,
  headers: CreatePetHeaders,
  success: Pet.pipe(HttpApiSchema.status(201)),
  error: [
    errorBodies.BadRequest,
    errorBodies.Conflict,
    errorBodies.PayloadTooLarge,
    errorBodies.UnsupportedMediaType,
    errorBodies.UnprocessableContent,
    errorBodies.ServiceUnavailable,
    errorBodies.InternalError
  ]
})
  .annotate(HttpApi.PayloadParseOptions, newPetParseOptions)
  .annotate(OpenApi.Summary, "Add an animal")
  .annotate(
    OpenApi.Transform,
    withResponseHeaders({
      "201": { Location: ["Where the new animal is.", "/v1/pets/42"] },
      "503": { "Retry-After": ["Seconds after which the create may be retried.", "10"] }
    })
  )
  .annotate(
    OpenApi.Description,
    "Stores a new animal and answers 201 with it, its assigned `id` and `Location: /v1/pets/{id}`. With an " +
      "`Idempotency-Key`, a retry with the same body returns the first answer and creates nothing; the same key " +
      "with another body gets 422 `idempotency_key_reused`, and a retry while the first is running 409 " +
      "`idempotency_request_in_progress`. While writes are stopped for a move of the database, it answers 503 " +
      "`read_only` with `Retry-After`; reads go on."
  )

/** @deprecated Removed on 5 December 2030 (410 from then on): use `listPets` with `status`. */
export const getPet = HttpApiEndpoint.get("getPet", "/pets/:petId", {
  params: GetPetPath,
  success: Pet,
  error: [errorBodies.BadRequest, errorBodies.NotFound, errorBodies.ServiceUnavailable, errorBodies.InternalError]
})
  // A middleware wraps those added before it: the sunset policy runs outside authentication.
  .middleware(SchemaErrors)
  .middleware(Authentication)
  .middleware(SunsetPolicy)
  .annotate(OpenApi.Deprecated, true)
  .annotate(
    OpenApi.Transform,
    flow(
      // Written as text in the path, but an integer to every client.
      withParameterSchemas({
        petId: { type: "integer", format: "int64", examples: [1], description: petIdDescription }
      }),
      withResponseHeaders({
        "*": {
          Deprecation: ["When this endpoint was deprecated (RFC 9745).", exampleSunsetHeaders.deprecation],
          Sunset: ["When this endpoint is removed (RFC 8594).", exampleSunsetHeaders.sunset],
          Link: [
            "The documentation of the replacement, `GET /v1/pets` with the status filter.",
            exampleSunsetHeaders.link
          ]
        }
      })
    )
  )
  .annotate(OpenApi.Summary, "Fetch one animal (deprecated)")
  .annotate(
    OpenApi.Description,
    `Deprecated: use \`GET /v1/pets\` with the \`status\` filter instead. Removed on ${getPetSunsetAt.toUTCString()}; ` +
      "from then on it answers 410 `endpoint_removed`."
  )

export class PetsApi extends HttpApiGroup.make("pets")
  .add(listPets, createPet, getPet)
  .middleware(SchemaErrors)
  .middleware(Authentication)
  .prefix("/v1")
  .annotate(OpenApi.Description, "The catalogue of animals held in the store.")
{}
