import { Context, type Effect, Layer, type Option } from "effect"
import type { NewPet, Pet, PetId, PetStatus } from "../Domain/Pet.js"
import type { IdempotencyScope, Reservation } from "./Idempotency.js"
import { makeInMemoryPetRepository } from "./PetRepositoryInMemory.js"
import { makeSqlPetRepository } from "./PetRepositorySql.js"

export type { IdempotencyScope, Reservation } from "./Idempotency.js"

export interface PetQuery {
  readonly status?: PetStatus | undefined
  /** Only pets with a larger id: the position a cursor carries. */
  readonly afterId?: PetId | undefined
  readonly limit: number
}

export interface PetPage {
  readonly pets: ReadonlyArray<Pet>
  /** Whether more pets match beyond this page. */
  readonly hasMore: boolean
}

/** Where the animals are kept. Ids are assigned by the store, ascending, and never reused. */
export class PetRepository extends Context.Tag("petstore/PetRepository")<
  PetRepository,
  {
    readonly create: (pet: NewPet) => Effect.Effect<Pet>
    readonly findById: (id: PetId) => Effect.Effect<Option.Option<Pet>>
    readonly list: (query: PetQuery) => Effect.Effect<PetPage>
    /** Claims an idempotency key before its request's body is read. */
    readonly reserve: (scope: IdempotencyScope) => Effect.Effect<Reservation>
    /** Gives back a reservation whose request failed before creating anything. */
    readonly release: (scope: IdempotencyScope) => Effect.Effect<void>
    /** Creates the pet and completes the reservation in one transaction. */
    readonly createOnce: (scope: IdempotencyScope, fingerprint: string, pet: NewPet) => Effect.Effect<Pet>
    /** Whether the store answers, for the readiness probe. */
    readonly isReady: Effect.Effect<boolean>
  }
>() {
  /** Pets in the process's memory, for tests and for composing without a database. */
  static readonly InMemory = Layer.effect(PetRepository, makeInMemoryPetRepository)

  /** Pets in the `pets` table of the database the `SqlClient` reaches, SQLite or PostgreSQL. */
  static readonly Sql = Layer.scoped(PetRepository, makeSqlPetRepository)
}
