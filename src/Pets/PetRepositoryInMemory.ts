import { Effect, Layer } from "effect"
import { MemoryDatabase } from "../Sql/MemoryDatabase.js"
import { makeSqlPetRepository } from "./PetRepositorySql.js"

/**
 * The SQL store on a database in the process's memory, kept for the caller's scope: the one tests
 * swap in. No background sweep: a reservation takes over an expired record itself, and a test clock
 * moved by years would run one sweep per minute passed.
 */
export const makeInMemoryPetRepository = Effect.flatMap(
  Layer.build(MemoryDatabase),
  (database) => Effect.provide(makeSqlPetRepository, database)
)
