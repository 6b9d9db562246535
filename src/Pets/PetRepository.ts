import { SqlClient, SqlSchema } from "@effect/sql"
import { Context, Effect, Layer, Option, Ref, Schema } from "effect"
import { NewPet, Pet, PetId, PetStatus } from "../Domain/Pet.js"

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

      const insert = SqlSchema.single({
        Request: NewPet,
        Result: PetRow,
        execute: (pet) =>
          sql`INSERT INTO pets (name, category_id, status)
              VALUES (${pet.name}, ${pet.categoryId}, ${pet.status ?? null})
              RETURNING id, name, category_id, status`
      })
      const byId = SqlSchema.findOne({
        Request: PetId,
        Result: PetRow,
        execute: (id) => sql`SELECT id, name, category_id, status FROM pets WHERE id = ${id}`
      })
      const page = SqlSchema.findAll({
        Request: Schema.Struct({ status: Schema.NullOr(PetStatus), afterId: Schema.Number, limit: Schema.Number }),
        Result: PetRow,
        execute: ({ afterId, limit, status }) =>
          status === null
            ? sql`SELECT id, name, category_id, status FROM pets
                  WHERE id > ${afterId} ORDER BY id LIMIT ${limit}`
            : sql`SELECT id, name, category_id, status FROM pets
                  WHERE status = ${status} AND id > ${afterId} ORDER BY id LIMIT ${limit}`
      })

      return PetRepository.of({
        create: (newPet) => Effect.orDie(insert(newPet)),
        findById: (id) => Effect.orDie(byId(id)),
        list: ({ afterId, limit, status }) =>
          // One row more than the page tells whether another page follows.
          page({ status: status ?? null, afterId: afterId ?? 0, limit: limit + 1 }).pipe(
            Effect.map((rows) => ({ pets: rows.slice(0, limit), hasMore: rows.length > limit })),
            Effect.orDie
          ),
        isReady: sql`SELECT 1`.pipe(Effect.as(true), Effect.orElseSucceed(() => false))
      })
    })
  )
}

/** A row of `pets`: snake_case columns, NULL for an absent status. */
const PetRow = Schema.transform(
  Schema.Struct({
    id: Schema.Number,
    name: Schema.String,
    category_id: Schema.Number,
    status: Schema.NullOr(PetStatus)
  }),
  Schema.typeSchema(Pet),
  {
    strict: true,
    decode: ({ category_id, id, name, status }) =>
      status === null ? { id, name, categoryId: category_id } : { id, name, categoryId: category_id, status },
    encode: ({ categoryId, id, name, status }) => ({ id, name, category_id: categoryId, status: status ?? null })
  }
)
