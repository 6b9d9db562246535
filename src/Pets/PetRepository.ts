import { Context, Effect, Layer, type Option } from "effect"
import type { DatabaseUnavailable } from "../Domain/DatabaseUnavailable.js"
import type { NewPet, Pet, PetId, PetStatus } from "../Domain/Pet.js"
import type { ClaimTakenOver, IdempotencyScope, Reservation } from "./Idempotency.js"
import { makeInMemoryPetRepository } from "./PetRepositoryInMemory.js"
import { makeSqlPetRepository, purgeExpiredKeys } from "./PetRepositorySql.js"

/** Writable; silent (down, hung, locked); refusing writes (a standby); or its SQLite file is gone or damaged. */
export type Readiness = "ready" | "unavailable" | "read_only" | "unusable"

/** Ids from the store, ascending, never reused. Cannot serve now: `DatabaseUnavailable`; other failures: defects. */
export class PetRepository extends Context.Service<PetRepository, {
  readonly create: (pet: NewPet) => Effect.Effect<Pet, DatabaseUnavailable>
  readonly findById: (id: PetId) => Effect.Effect<Option.Option<Pet>, DatabaseUnavailable>
  /** Pets after `afterId` (a cursor's position), and whether more match beyond the page. */
  readonly list: (query: {
    readonly status?: PetStatus | undefined
    readonly afterId?: PetId | undefined
    readonly limit: number
  }) => Effect.Effect<{ readonly pets: ReadonlyArray<Pet>; readonly hasMore: boolean }, DatabaseUnavailable>
  /** Claims an idempotency key before the body is read; one unfinished past `abandonedAfterMillis` is taken over. */
  readonly reserve: (
    scope: IdempotencyScope,
    abandonedAfterMillis: number
  ) => Effect.Effect<Reservation, DatabaseUnavailable>
  /** Gives back the claim made at `claimedAt` if its request failed before creating anything. */
  readonly release: (scope: IdempotencyScope, claimedAt: number) => Effect.Effect<void, DatabaseUnavailable>
  /** Creates the pet and completes the claim made at `claimedAt` in one transaction; nothing if it was taken over. */
  readonly createOnce: (
    scope: IdempotencyScope,
    claimedAt: number,
    fingerprint: string,
    pet: NewPet
  ) => Effect.Effect<Pet, ClaimTakenOver | DatabaseUnavailable>
  /** Whether the store answers and takes writes, for the readiness probe. */
  readonly readiness: Effect.Effect<Readiness>
}>()("petstore/PetRepository") {
  /** Pets in the `pets` table of the database the `SqlClient` reaches, SQLite or PostgreSQL. */
  static readonly Sql = Layer.effect(PetRepository, Effect.andThen(purgeExpiredKeys, makeSqlPetRepository))

  /** Pets in the process's memory, for tests and for composing without a database. */
  static readonly InMemory = Layer.effect(PetRepository, makeInMemoryPetRepository)
}
