import { HttpApiBuilder, HttpApp, HttpServerResponse } from "@effect/platform"
import { Clock, Effect, Layer, Option } from "effect"
import { PetStoreApi } from "../Api.js"
import { AppConfig } from "../AppConfig.js"
import { Gone, NotFound } from "../Domain/ApiError.js"
import { NewPet, type Pet } from "../Domain/Pet.js"
import { readJsonBody } from "../Http/JsonBody.js"
import { docsPath } from "../Http/Routes.js"
import { defaultLimit } from "./Api.js"
import { Cursors } from "./Cursors.js"
import { getPetDeprecatedAt, getPetSunsetAt, SunsetPolicy } from "./Deprecation.js"
import { PetRepository } from "./PetRepository.js"

/**
 * A Pet is its own wire form (the Schema has no transformation) and the repository has already
 * checked every row, so responses are written directly: encoding a page of 100 pets through the
 * Schema again would cost more than the query.
 */
const json = (body: Pet | ReadonlyArray<Pet>, options?: { readonly status?: number; readonly headers?: Record<string, string> }) =>
  HttpServerResponse.unsafeJson(body, options)

const readNewPet = readJsonBody(NewPet)

export const PetsHttpLive = HttpApiBuilder.group(PetStoreApi, "pets", (handlers) =>
  Effect.gen(function*() {
    const pets = yield* PetRepository
    const cursors = yield* Cursors
    const { publicBaseUrl } = yield* AppConfig

    return handlers
      .handle("listPets", ({ urlParams: { cursor, limit = defaultLimit, status } }) =>
        Effect.gen(function*() {
          const afterId = cursor === undefined ? undefined : yield* cursors.decode(cursor, status)
          const page = yield* pets.list({ afterId, limit, status })
          const last = page.pets[page.pets.length - 1]
          if (!page.hasMore || last === undefined) return json(page.pets)
          const next = new URL(`${publicBaseUrl}/v1/pets`)
          next.searchParams.set("limit", String(limit))
          if (status !== undefined) next.searchParams.set("status", status)
          next.searchParams.set("cursor", cursors.encode({ afterId: last.id, status }))
          return json(page.pets, { headers: { link: `<${next.href}>; rel="next"` } })
        }))
      // Raw: the body is read here, after authentication, with its own size and media-type checks.
      .handleRaw("createPet", () =>
        Effect.gen(function*() {
          const newPet = yield* readNewPet
          const pet = yield* pets.create(newPet)
          return json(pet, { status: 201, headers: { location: `/v1/pets/${pet.id}` } })
        }))
      .handle("getPet", ({ path: { petId } }) =>
        pets.findById(petId).pipe(
          Effect.flatMap(Option.match({
            onNone: () =>
              Effect.fail(new NotFound({ code: "pet_not_found", message: `petId: no animal has id ${petId}`, status: 404 })),
            onSome: (pet) => Effect.succeed(json(pet))
          }))
        ))
  }))

const unixSeconds = (date: Date) => Math.floor(date.getTime() / 1000)

export const SunsetPolicyLive = Layer.effect(
  SunsetPolicy,
  Effect.gen(function*() {
    const { publicBaseUrl } = yield* AppConfig
    const headers = {
      deprecation: `@${unixSeconds(getPetDeprecatedAt)}`,
      sunset: getPetSunsetAt.toUTCString(),
      link: `<${publicBaseUrl}${docsPath}#tag/pets/GET/v1/pets>; rel="deprecation"; type="text/html"`
    }
    const mark = HttpApp.appendPreResponseHandler((_request, response) =>
      Effect.succeed(HttpServerResponse.setHeaders(response, headers))
    )
    const removed = new Gone({
      code: "endpoint_removed",
      message: `GET /v1/pets/{petId} was removed on ${headers.sunset}; use GET /v1/pets with the status filter`,
      status: 410
    })
    return Effect.zipRight(
      mark,
      Effect.flatMap(Clock.currentTimeMillis, (now) => now >= getPetSunsetAt.getTime() ? Effect.fail(removed) : Effect.void)
    )
  })
)
