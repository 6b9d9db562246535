import { Clock, Effect, Option, Ref } from "effect"
import type { NewPet, Pet } from "../Domain/Pet.js"
import { ClaimTakenOver, idempotencyRetentionMillis, type IdempotencyScope, type Reservation } from "./Idempotency.js"
import type { PetRepository } from "./PetRepository.js"

export const makeInMemoryPetRepository = Effect.gen(function*() {
  const state = yield* Ref.make({ lastId: 0, pets: [] as ReadonlyArray<Pet> })
  const records = new Map<string, { fingerprint?: string; pet?: Pet; createdAt: number }>()
  const recordKey = ({ apiKeyId, key }: IdempotencyScope) => `${apiKeyId}\u0000${key}`
  const create = (newPet: NewPet) =>
    Ref.modify(state, ({ lastId, pets }) => {
      const pet: Pet = { id: lastId + 1, ...newPet }
      return [pet, { lastId: pet.id, pets: [...pets, pet] }]
    })
  return {
    create,
    reserve: (scope, abandonedAfterMillis) =>
      Effect.map(Clock.currentTimeMillis, (now): Reservation => {
        for (const [key, record] of records) {
          if (record.createdAt < now - idempotencyRetentionMillis) records.delete(key)
        }
        const record = records.get(recordKey(scope))
        if (record?.pet !== undefined) return { _tag: "Completed", fingerprint: record.fingerprint!, pet: record.pet }
        if (record !== undefined && now - record.createdAt <= abandonedAfterMillis) return { _tag: "InProgress" }
        records.set(recordKey(scope), { createdAt: now })
        return { _tag: "Reserved", claimedAt: now }
      }),
    release: (scope, claimedAt) =>
      Effect.sync(() => {
        const record = records.get(recordKey(scope))
        if (record?.pet === undefined && record?.createdAt === claimedAt) records.delete(recordKey(scope))
      }),
    createOnce: (scope, claimedAt, fingerprint, newPet) =>
      Effect.suspend(() => {
        const record = records.get(recordKey(scope))
        if (record === undefined || record.pet !== undefined || record.createdAt !== claimedAt) {
          return Effect.fail(new ClaimTakenOver())
        }
        return Effect.map(create(newPet), (pet) => {
          Object.assign(record, { fingerprint, pet })
          return pet
        })
      }),
    findById: (id) =>
      Effect.map(Ref.get(state), ({ pets }) => Option.fromUndefinedOr(pets.find((pet) => pet.id === id))),
    list: ({ afterId, limit, status }) =>
      Effect.map(Ref.get(state), ({ pets }) => {
        const matching = pets.filter((pet) =>
          (afterId === undefined || pet.id > afterId) && (status === undefined || pet.status === status)
        )
        return { pets: matching.slice(0, limit), hasMore: matching.length > limit }
      }),
    readiness: Effect.succeed("ready")
  } satisfies PetRepository["Service"]
})
