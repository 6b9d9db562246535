import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Duration, Effect, Exit, Layer, Option } from "effect"
import { hash } from "node:crypto"
import { PetStoreApi } from "../Api.js"
import { getPetDeprecatedAt, getPetReplacementFragment, getPetSunsetAt, SunsetPolicy } from "../Api/Deprecation.js"
import { docsPath } from "../Api/DocumentPaths.js"
import { defaultLimit } from "../Api/Pets.js"
import { AppConfig } from "../Config/AppConfig.js"
import { Conflict, Gone, NotFound, ServiceUnavailable, UnprocessableContent } from "../Domain/ApiError.js"
import { CurrentCaller } from "../Domain/Caller.js"
import { NewPet, type Pet } from "../Domain/Pet.js"
import { readJsonBody } from "../Request/JsonBody.js"
import { withCurrentRequest } from "../Request/CurrentRequest.js"
import { ReadOnlyMode, retryAfterSeconds } from "../Sql/ReadOnlyMode.js"
import { Cursors } from "./Cursors.js"
import { type IdempotencyScope, PetRepository } from "./PetRepository.js"

/**
 * A Pet is its own wire form (the Schema has no transformation) and the repository has already
 * checked every row, so responses are written directly rather than through the endpoint's
 * success schema, whose encoding checks every field again: 290 to 380 µs for a page of 100 pets,
 * 67 to 98 µs for 20 and 3 µs for one, where writing the JSON takes 10 to 17, 2 and 0.3 µs
 * (`Schema.encodeSync(Pets)` against `JSON.stringify`, in process, on a loaded 2-core machine).
 */
const json = (body: Pet | ReadonlyArray<Pet>, options?: { readonly status?: number; readonly headers?: Record<string, string> }) =>
  HttpServerResponse.unsafeJson(body, options)

const readNewPet = readJsonBody(NewPet)

const created = (pet: Pet) => json(pet, { status: 201, headers: { location: `/v1/pets/${pet.id}` } })

const newPetFields = Object.keys(NewPet.fields) as ReadonlyArray<keyof NewPet>

/**
 * What identifies a request body for an idempotency key: its decoded value, so spacing and key
 * order do not count. Every field of `NewPet` takes part, in the schema's order (absent as null),
 * so a field added to the schema is part of it without a change here.
 */
const fingerprint = (pet: NewPet) =>
  hash("sha256", JSON.stringify(newPetFields.map((field) => pet[field] ?? null)), "hex")

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

export const PetsHttpLive = HttpApiBuilder.group(PetStoreApi, "pets", (handlers) =>
  Effect.gen(function*() {
    const pets = yield* PetRepository
    const cursors = yield* Cursors
    const { publicBaseUrl, requestTimeout } = yield* AppConfig
    // A request is answered by its deadline, so a claim older than that was abandoned (its
    // request cut off, say, by a database that went away); a retry then takes it over.
    const abandonedAfterMillis = Duration.toMillis(requestTimeout)
    const readOnlyMode = yield* ReadOnlyMode

    /**
     * A create under an idempotency key: the key is reserved before the body is read (a retry
     * meanwhile gets 409), the pet and the key's record are written in one transaction, and a
     * retry with the same body replays the first answer.
     */
    const createOnce = (scope: IdempotencyScope) =>
      Effect.flatMap(pets.reserve(scope, abandonedAfterMillis), (reservation): Effect.Effect<
        HttpServerResponse.HttpServerResponse,
        Effect.Effect.Error<typeof readNewPet> | Conflict | UnprocessableContent,
        Effect.Effect.Context<typeof readNewPet>
      > => {
        switch (reservation._tag) {
          case "InProgress":
            return Effect.fail(inProgress)
          case "Completed":
            return Effect.flatMap(readNewPet, (newPet) =>
              fingerprint(newPet) === reservation.fingerprint ? Effect.succeed(created(reservation.pet)) : Effect.fail(reused))
          case "Reserved":
            return readNewPet.pipe(
              Effect.flatMap((newPet) => pets.createOnce(scope, reservation.claimedAt, fingerprint(newPet), newPet)),
              Effect.catchTag("ClaimTakenOver", () => Effect.fail(inProgress)),
              Effect.map(created),
              Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : pets.release(scope, reservation.claimedAt))
            )
        }
      })

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
      .handleRaw("createPet", ({ headers }) => {
        if (readOnlyMode.isOn()) {
          return withCurrentRequest((current) => {
            current.noteResponseHeaders({ "retry-after": String(retryAfterSeconds) })
            return Effect.fail(readOnly)
          })
        }
        const key = headers["idempotency-key"]
        if (key === undefined) return Effect.map(Effect.flatMap(readNewPet, pets.create), created)
        return Effect.flatMap(CurrentCaller, ({ keyId }) => createOnce({ apiKeyId: keyId, key }))
      })
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
      link: `<${publicBaseUrl}${docsPath}${getPetReplacementFragment}>; rel="deprecation"; type="text/html"`
    }
    const removed = new Gone({
      code: "endpoint_removed",
      message: `GET /v1/pets/{petId} was removed on ${headers.sunset}; use GET /v1/pets with the status filter`,
      status: 410
    })
    const sunsetMillis = getPetSunsetAt.getTime()
    return withCurrentRequest((current) => {
      current.noteResponseHeaders(headers)
      return Effect.clockWith((clock) => clock.unsafeCurrentTimeMillis() >= sunsetMillis ? Effect.fail(removed) : Effect.void)
    })
  })
)
