import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../Auth/Authentication.js"
import {
  BadRequestBody,
  NotFoundBody,
  PayloadTooLargeBody,
  UnsupportedMediaTypeBody
} from "../Domain/ApiError.js"
import { DecimalIntFromString, NewPet, Pet, Pets, PetStatus } from "../Domain/Pet.js"
import { getPetSunsetAt, SunsetPolicy } from "./Deprecation.js"

export const defaultLimit = 20

export const ListPetsParams = Schema.Struct({
  limit: Schema.optional(
    DecimalIntFromString.pipe(Schema.compose(Schema.Int.pipe(Schema.between(1, 100)))).annotations({
      description: `Maximum number of animals returned, 1 to 100; ${defaultLimit} when absent.`,
      default: defaultLimit,
      message: () => ({ message: "must be an integer from 1 to 100", override: true })
    })
  ),
  status: Schema.optional(PetStatus.annotations({
    description: "Return only animals with this status.",
    message: () => ({ message: "must be one of available, pending, sold", override: true })
  })),
  cursor: Schema.optional(Schema.String.annotations({
    description: "Opaque position from the `Link: rel=\"next\"` header of the previous page."
  }))
})

export const GetPetPath = Schema.Struct({
  petId: DecimalIntFromString.annotations({
    description: "Identifier of the animal to retrieve.",
    message: () => ({ message: "must be a decimal integer in the safe range", override: true })
  })
})

export const listPets = HttpApiEndpoint.get("listPets", "/pets")
  .setUrlParams(ListPetsParams)
  .addSuccess(Pets)
  .addError(BadRequestBody)
  .annotate(OpenApi.Summary, "List animals")
  .annotate(
    OpenApi.Description,
    "Returns animals in ascending id order, optionally filtered by status. When more animals match, " +
      "the response carries `Link: <url>; rel=\"next\"` pointing at the next page."
  )

export const createPet = HttpApiEndpoint.post("createPet", "/pets")
  .setPayload(NewPet)
  .addSuccess(Pet, { status: 201 })
  .addError(BadRequestBody)
  .addError(PayloadTooLargeBody)
  .addError(UnsupportedMediaTypeBody)
  .annotate(OpenApi.Summary, "Add an animal")
  .annotate(
    OpenApi.Description,
    "Stores a new animal and answers 201 with it, its assigned `id` and `Location: /v1/pets/{id}`."
  )

export const getPet = HttpApiEndpoint.get("getPet", "/pets/:petId")
  .setPath(GetPetPath)
  .addSuccess(Pet)
  .addError(BadRequestBody)
  .addError(NotFoundBody)
  .middleware(SunsetPolicy)
  .annotate(OpenApi.Deprecated, true)
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
