import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option, type ParseResult, Ref, Schema } from "effect"
import type { NewPet, Pet, PetId } from "../Domain/Pet.js"
import { PetStatus } from "../Domain/Pet.js"

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
    /** Whether the store answers, for the readiness probe. */
    readonly isReady: Effect.Effect<boolean>
  }
>() {
  /** Pets in the process's memory, for tests and for composing without a database. */
  static readonly InMemory = Layer.effect(
    PetRepository,
    Effect.gen(function*() {
      const state = yield* Ref.make({ lastId: 0, pets: [] as ReadonlyArray<Pet> })
      return PetRepository.of({
        create: (newPet) =>
          Ref.modify(state, ({ lastId, pets }) => {
            const pet: Pet = { id: lastId + 1, ...newPet }
            return [pet, { lastId: pet.id, pets: [...pets, pet] }]
          }),
        findById: (id) => Effect.map(Ref.get(state), ({ pets }) => Option.fromNullable(pets.find((pet) => pet.id === id))),
        list: ({ afterId, limit, status }) =>
          Effect.map(Ref.get(state), ({ pets }) => {
            const matching = pets.filter((pet) =>
              (afterId === undefined || pet.id > afterId) && (status === undefined || pet.status === status)
            )
            return { pets: matching.slice(0, limit), hasMore: matching.length > limit }
          }),
        isReady: Effect.succeed(true)
      })
    })
  )

  /** Pets in the `pets` table of the SQL database. */
  static readonly Sql = Layer.effect(
    PetRepository,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = sql`id, name, category_id, status`
      return PetRepository.of({
        create: (pet) =>
          sql`INSERT INTO pets (name, category_id, status) VALUES (${pet.name}, ${pet.categoryId}, ${pet.status ?? null})
              RETURNING ${columns}`.pipe(Effect.flatMap(decodeRows), Effect.map((pets) => pets[0]!), Effect.orDie),
        findById: (id) =>
          sql`SELECT ${columns} FROM pets WHERE id = ${id}`.pipe(
            Effect.flatMap(decodeRows),
            Effect.map((pets) => Option.fromNullable(pets[0])),
            Effect.orDie
          ),
        list: ({ afterId = 0, limit, status }) =>
          // One row more than the page tells whether another page follows.
          (status === undefined
            ? sql`SELECT ${columns} FROM pets WHERE id > ${afterId} ORDER BY id LIMIT ${limit + 1}`
            : sql`SELECT ${columns} FROM pets WHERE status = ${status} AND id > ${afterId} ORDER BY id LIMIT ${
              limit + 1
            }`).pipe(
              Effect.flatMap(decodeRows),
              Effect.map((pets) => ({ pets: pets.slice(0, limit), hasMore: pets.length > limit })),
              Effect.orDie
            ),
        isReady: sql`SELECT 1`.pipe(Effect.as(true), Effect.orElseSucceed(() => false))
      })
    })
  )
}

/** Rows of `pets`: snake_case columns, NULL for an absent status. */
const PetRows = Schema.Array(Schema.Struct({
  id: Schema.Number,
  name: Schema.String,
  category_id: Schema.Number,
  status: Schema.NullOr(PetStatus)
}))

const decodePetRows = Schema.decodeUnknown(PetRows)

/**
 * Rows are checked against the table's shape, then mapped by hand: a Schema transformation per row
 * costs more than the query itself on a page of 100.
 */
const decodeRows = (rows: unknown): Effect.Effect<Array<Pet>, ParseResult.ParseError> =>
  Effect.map(decodePetRows(rows), (rows) =>
    rows.map(({ category_id, id, name, status }) =>
      status === null ? { id, name, categoryId: category_id } : { id, name, categoryId: category_id, status }
    ))
