import { Duration, Effect, Exit, Layer, Option } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { PetStoreApi } from "../Api.js"
import { CurrentCaller } from "../Api/Authentication.js"
import { defaultLimit, getPetSunsetAt, getPetSunsetHeaders, SunsetPolicy } from "../Api/Pets.js"
import { AppConfig } from "../Config/AppConfig.js"
import {
  Conflict,
  Gone,
  NotFound,
  retryAfterHeader,
  ServiceUnavailable,
  UnprocessableContent
} from "../Domain/ApiError.js"
import type { Pet, PetId } from "../Domain/Pet.js"
import { noteResponseHeaders } from "../Request/CurrentRequest.js"
import { orUnavailable } from "../Request/Unavailable.js"
import { ReadOnlyMode } from "../Sql/ReadOnlyMode.js"
import { Cursors } from "./Cursors.js"
import { fingerprint, type IdempotencyScope } from "./Idempotency.js"
import { readNewPet } from "./JsonBody.js"
import { PetRepository } from "./PetRepository.js"

/** As JSON directly: the success schema's encoding costs more than the rest of the request, and rows are checked. */
const page = (pets: ReadonlyArray<Pet>, headers?: Record<string, string>) =>
  HttpServerResponse.jsonUnsafe(pets, headers === undefined ? undefined : { headers })

/** A created pet, answered 201 (the endpoint's success status) with its `Location`. */
const created = (pet: Pet) => Effect.as(noteResponseHeaders({ location: `/v1/pets/${pet.id}` }), pet)

const inProgress = new Conflict({
  code: "idempotency_request_in_progress",
  message: "Idempotency-Key: a request with this key is still being processed; retry later",
  status: 409
})
const reused = new UnprocessableContent({
  code: "idempotency_key_reused",
  message: "Idempotency-Key: was used with a different request body",
  status: 422
})

const readOnly = new ServiceUnavailable({
  code: "read_only",
  message: "The store is read-only while its database is moved; reads are served, retry the create after Retry-After",
  status: 503
})
const readOnlyHeaders = retryAfterHeader("read_only")

const notFound = (petId: PetId) =>
  new NotFound({ code: "pet_not_found", message: `petId: no animal has id ${petId}`, status: 404 })

export const PetsHttpLive = HttpApiBuilder.group(PetStoreApi, "pets", (handlers) =>
  Effect.gen(function*() {
    const pets = yield* PetRepository
    const cursors = yield* Cursors
    const { publicBaseUrl, requestTimeout } = yield* AppConfig
    // A claim older than the request deadline was abandoned: a retry takes it over.
    const abandonedAfterMillis = Duration.toMillis(requestTimeout)
    const readOnlyMode = yield* ReadOnlyMode
    const listUrl = new URL(`${publicBaseUrl}/v1/pets`).href

    /** A create under an idempotency key: reserved before the body is read, replayed to a retry with the same body. */
    const createOnce = (scope: IdempotencyScope) =>
      Effect.gen(function*() {
        const reservation = yield* pets.reserve(scope, abandonedAfterMillis)
        if (reservation._tag === "InProgress") return yield* inProgress
        if (reservation._tag === "Completed") {
          const newPet = yield* readNewPet
          return yield* fingerprint(newPet) === reservation.fingerprint ? created(reservation.pet) : Effect.fail(reused)
        }
        return yield* readNewPet.pipe(
          Effect.flatMap((newPet) => pets.createOnce(scope, reservation.claimedAt, fingerprint(newPet), newPet)),
          Effect.catchTag("ClaimTakenOver", () => Effect.fail(inProgress)),
          Effect.flatMap(created),
          Effect.onExit((exit) =>
            Exit.isSuccess(exit) ? Effect.void : Effect.ignore(pets.release(scope, reservation.claimedAt))
          )
        )
      })

    return handlers
      .handle("listPets", ({ query: { cursor, limit = defaultLimit, status } }) =>
        Effect.gen(function*() {
          const afterId = cursor === undefined ? undefined : yield* cursors.decode(cursor, status)
          const found = yield* pets.list({ afterId, limit, status })
          const last = found.pets[found.pets.length - 1]
          if (!found.hasMore || last === undefined) return page(found.pets)
          // Each value is URL-safe as it is: a number, a status literal, a base64url cursor.
          const next = `${listUrl}?limit=${limit}${status === undefined ? "" : `&status=${status}`}&cursor=`
          return page(found.pets, { link: `<${next}${cursors.encode({ afterId: last.id, status })}>; rel="next"` })
        }).pipe(orUnavailable))
      // Raw: the body is read here, after authentication, with its own size and media-type checks.
      .handleRaw("createPet", ({ headers }) => {
        if (readOnlyMode.isOn()) return Effect.andThen(noteResponseHeaders(readOnlyHeaders), Effect.fail(readOnly))
        const key = headers["idempotency-key"]
        const create = key === undefined
          ? Effect.flatMap(Effect.flatMap(readNewPet, pets.create), created)
          : CurrentCaller.use(({ keyId }) => createOnce({ apiKeyId: keyId, key }))
        return orUnavailable(create)
      })
      .handle("getPet", ({ params: { petId } }) =>
        pets.findById(petId).pipe(
          Effect.flatMap(Option.match({ onNone: () => Effect.fail(notFound(petId)), onSome: Effect.succeed })),
          orUnavailable
        ))
  }))

/** getPet's sunset policy: `Deprecation`, `Sunset` and the replacement's `Link` on each answer; 410 from the sunset. */
export const SunsetPolicyLive = Layer.effect(
  SunsetPolicy,
  AppConfig.useSync(({ publicBaseUrl }) => {
    const headers = getPetSunsetHeaders(publicBaseUrl)
    const removed = new Gone({
      code: "endpoint_removed",
      message: `GET /v1/pets/{petId} was removed on ${headers.sunset}; use GET /v1/pets with the status filter`,
      status: 410
    })
    const sunsetMillis = getPetSunsetAt.getTime()
    const beforeSunset = Effect.andThen(
      noteResponseHeaders(headers),
      Effect.clockWith((clock) => clock.currentTimeMillisUnsafe() >= sunsetMillis ? Effect.fail(removed) : Effect.void)
    )
    return SunsetPolicy.of((httpEffect) => Effect.andThen(beforeSunset, httpEffect))
  })
)
