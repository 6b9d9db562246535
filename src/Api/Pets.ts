import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import {
  BadRequestBody,
  ConflictBody,
  NotFoundBody,
  PayloadTooLargeBody,
  ServiceUnavailableBody,
  UnprocessableContentBody,
  UnsupportedMediaTypeBody
} from "../Domain/ApiError.js"
import { DecimalIntFromString, NewPet, Pet, Pets, PetStatus } from "../Domain/Pet.js"
import { Authentication } from "./Authentication.js"
import { getPetReplacementFragment, getPetSunsetAt, SunsetPolicy } from "./Deprecation.js"
import { withResponseHeaders } from "./OpenApiDocument.js"

export const defaultLimit = 20

export const ListPetsParams = Schema.Struct({
  limit: Schema.optional(
    DecimalIntFromString.pipe(Schema.compose(Schema.Int.pipe(Schema.between(1, 100)))).annotations({
      description: `Maximum number of animals returned, 1 to 100; ${defaultLimit} when absent.`,
      // Written as text in the query string, but an integer to every client.
      jsonSchema: {
        type: "integer",
        minimum: 1,
        maximum: 100,
        default: defaultLimit,
        examples: [defaultLimit],
        description: `Maximum number of animals returned, 1 to 100; ${defaultLimit} when absent.`
      },
      message: () => ({ message: "must be an integer from 1 to 100", override: true })
    })
  ),
  status: Schema.optional(PetStatus.annotations({
    description: "Return only animals with this status.",
    message: () => ({ message: "must be one of available, pending, sold", override: true })
  })),
  cursor: Schema.optional(Schema.String.annotations({
    description: "Opaque position from the `Link: rel=\"next\"` header of the previous page.",
    examples: ["MjAuYXZhaWxhYmxl.x8KfQ2m1bV0sZ3pTnE4yLw"]
  }))
})

/** `Idempotency-Key`: 1 to 255 printable ASCII characters, chosen by the client per operation. */
export const CreatePetHeaders = Schema.Struct({
  "idempotency-key": Schema.optional(
    Schema.String.pipe(Schema.pattern(/^[\x20-\x7e]{1,255}$/)).annotations({
      description: "Makes a retried create safe: the same key with the same body returns the first answer and " +
        "creates nothing. Kept at least 24 hours, per API key.",
      examples: ["8e0f6a2c-create-rex"],
      message: () => ({ message: "must be 1 to 255 printable ASCII characters", override: true })
    })
  )
})

export const GetPetPath = Schema.Struct({
  petId: DecimalIntFromString.annotations({
    description: "Identifier of the animal to retrieve.",
    jsonSchema: { type: "integer", format: "int64", examples: [1], description: "Identifier of the animal to retrieve." },
    message: () => ({
      message: "must be a decimal integer in the safe range, written canonically (no +, no leading zeros, no -0)",
      override: true
    })
  })
})

/**
 * `GET /v1/pets`: animals in ascending id order, `limit` (1–100, default 20) at a time, optionally
 * only those with `status`; the next page is linked by `Link: <…>; rel="next"`.
 */
export const listPets = HttpApiEndpoint.get("listPets", "/pets")
  .setUrlParams(ListPetsParams)
  .addSuccess(Pets)
  .addError(BadRequestBody)
  .addError(ServiceUnavailableBody)
  .annotate(OpenApi.Summary, "List animals")
  .annotate(
    OpenApi.Transform,
    withResponseHeaders({
      "200": {
        Link: {
          description: "The next page, when more animals match: an absolute URL keeping limit and status, with a cursor.",
          example: "<https://petstore.example.com/v1/pets?limit=20&status=available&cursor=MjAu.x8Kf>; rel=\"next\""
        }
      },
      "503": { "Retry-After": { description: "Seconds after which the request may be retried.", example: "1" } }
    })
  )
  .annotate(
    OpenApi.Description,
    "Returns animals in ascending id order, optionally filtered by status. When more animals match, " +
      "the response carries `Link: <url>; rel=\"next\"` pointing at the next page."
  )

/** `POST /v1/pets`: adds an animal and answers 201 with it and `Location: /v1/pets/{id}`. */
export const createPet = HttpApiEndpoint.post("createPet", "/pets")
  .setPayload(NewPet)
  .setHeaders(CreatePetHeaders)
  .addSuccess(Pet, { status: 201 })
  .addError(BadRequestBody)
  .addError(ConflictBody)
  .addError(PayloadTooLargeBody)
  .addError(UnsupportedMediaTypeBody)
  .addError(UnprocessableContentBody)
  .addError(ServiceUnavailableBody)
  .annotate(OpenApi.Summary, "Add an animal")
  .annotate(
    OpenApi.Transform,
    withResponseHeaders({
      "201": { Location: { description: "Where the new animal is.", example: "/v1/pets/42" } },
      "503": { "Retry-After": { description: "Seconds after which the create may be retried.", example: "10" } }
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

/**
 * `GET /v1/pets/{petId}`: one animal, or 404.
 * @deprecated Removed on 5 December 2030 (410 from then on): use `listPets` with `status`.
 */
export const getPet = HttpApiEndpoint.get("getPet", "/pets/:petId")
  .setPath(GetPetPath)
  .addSuccess(Pet)
  .addError(BadRequestBody)
  .addError(NotFoundBody)
  .addError(ServiceUnavailableBody)
  .middleware(SunsetPolicy)
  .annotate(OpenApi.Deprecated, true)
  .annotate(
    OpenApi.Transform,
    withResponseHeaders({
      "*": {
        Deprecation: { description: "When this endpoint was deprecated (RFC 9745).", example: "@1767225600" },
        Sunset: { description: "When this endpoint is removed (RFC 8594).", example: "Thu, 05 Dec 2030 00:00:00 GMT" },
        Link: {
          description: "The documentation of the replacement, `GET /v1/pets` with the status filter.",
          example: `<https://petstore.example.com/docs${getPetReplacementFragment}>; rel="deprecation"; type="text/html"`
        }
      }
    })
  )
  .annotate(OpenApi.Summary, "Fetch one animal (deprecated)")
  .annotate(
    OpenApi.Description,
    `Deprecated: use \`GET /v1/pets\` with the \`status\` filter instead. Removed on ${getPetSunsetAt.toUTCString()}; ` +
      "from then on it answers 410 `endpoint_removed`."
  )

/** The animal catalogue: every operation requires a bearer API key. */
export class PetsApi extends HttpApiGroup.make("pets")
  .add(listPets)
  .add(createPet)
  .add(getPet)
  .middleware(Authentication)
  .prefix("/v1")
  .annotate(OpenApi.Description, "The catalogue of animals held in the store.")
{}
