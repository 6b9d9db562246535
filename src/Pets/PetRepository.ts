import { Context, Effect, Layer, Option, Ref } from "effect"
import type { NewPet, Pet, PetId } from "../Domain/Pet.js"
import { PetStatus } from "../Domain/Pet.js"
import { Sqlite } from "../Sql/Database.js"

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

  /** Pets in the `pets` table of the SQLite database, through prepared statements. */
  static readonly Sqlite = Layer.effect(
    PetRepository,
    Effect.map(Sqlite, (db) => {
      const columns = "id, name, category_id, status"
      const insert = db.query(`INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING ${columns}`)
      const byId = db.query(`SELECT ${columns} FROM pets WHERE id = ?`)
      const page = db.query(`SELECT ${columns} FROM pets WHERE id > ? ORDER BY id LIMIT ?`)
      const pageByStatus = db.query(`SELECT ${columns} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`)
      const ping = db.query("SELECT 1")
      // A failing statement is a defect: nothing a caller could handle.
      return PetRepository.of({
        create: (pet) => Effect.sync(() => toPets([insert.get(pet.name, pet.categoryId, pet.status ?? null)])[0]!),
        findById: (id) => Effect.sync(() => Option.fromNullable(toPets([byId.get(id)].filter((row) => row !== null))[0])),
        list: ({ afterId = 0, limit, status }) =>
          Effect.sync(() => {
            // One row more than the page tells whether another page follows.
            const rows = status === undefined ? page.all(afterId, limit + 1) : pageByStatus.all(status, afterId, limit + 1)
            const pets = toPets(rows)
            return { pets: pets.slice(0, limit), hasMore: pets.length > limit }
          }),
        isReady: Effect.sync(() => ping.get() !== null).pipe(Effect.catchAllDefect(() => Effect.succeed(false)))
      })
    })
  )
}

const statuses: ReadonlySet<unknown> = new Set(PetStatus.literals)

/**
 * Rows of `pets` (snake_case columns, NULL for an absent status) checked against the table's shape
 * and mapped by hand: decoding through a Schema costs more than the query on a page of 100.
 */
const toPets = (rows: ReadonlyArray<any>): Array<Pet> =>
  rows.map(({ category_id, id, name, status }) => {
    if (
      !Number.isSafeInteger(id) || typeof name !== "string" || !Number.isSafeInteger(category_id) ||
      (status !== null && !statuses.has(status))
    ) {
      throw new Error(`pets row ${id} does not have the table's shape`)
    }
    return status === null ? { id, name, categoryId: category_id } : { id, name, categoryId: category_id, status }
  })
