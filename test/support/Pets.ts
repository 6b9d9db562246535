import { SchemaAST } from "effect"
import { NewPet } from "../../src/Domain/Pet.js"

/**
 * A new pet with every field of the schema given, and one that differs from it in every field. A
 * field added to `NewPet` is a type error here until it has a value in both, and from then on takes
 * part in each test that uses them: the repository contract and its idempotent replay, the
 * fingerprint of an idempotent create, the move, the command line.
 */
export const everyField: Required<NewPet> = { name: "Rex", categoryId: 3, status: "available" }
export const otherValues: Required<NewPet> = { name: "Rox", categoryId: 4, status: "sold" }

/** The fields of `NewPet`, in the schema's order. */
export const newPetFields = Object.keys(NewPet.fields) as ReadonlyArray<keyof NewPet>

/** The fields a new pet may leave out. */
export const optionalFields = newPetFields.filter((field) => SchemaAST.isOptional(NewPet.fields[field].ast))
