import { Schema } from "effect"

/** Integers a JSON client can carry without rounding: larger values are rejected, never rounded. */
const SafeInt = Schema.Int.pipe(Schema.between(Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER))

/**
 * A decimal integer written as text, as path and query parameters carry it, in its one canonical
 * spelling (no `+`, no leading zeros, no `-0`), so that one resource has one URL.
 */
export const DecimalIntFromString = Schema.String.pipe(
  Schema.pattern(/^(?:0|-?[1-9][0-9]{0,15})$/),
  Schema.compose(Schema.NumberFromString),
  Schema.compose(SafeInt)
)

export const PetId = SafeInt.annotations({
  identifier: "PetId",
  description: "Unique identifier of an animal, assigned by the service on creation; never reused.",
  examples: [1],
  format: "int64"
})
export type PetId = typeof PetId.Type

export const PetStatus = Schema.Literal("available", "pending", "sold").annotations({
  identifier: "PetStatus",
  description: "Availability status of an animal."
})
export type PetStatus = typeof PetStatus.Type

/**
 * Text every store keeps as it came: well-formed Unicode (a lone surrogate has no UTF-8 form) and
 * no U+0000 (PostgreSQL text cannot hold it).
 */
const isStorableText = (text: string) => text.isWellFormed() && !text.includes("\u0000")

export const PetName = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(255),
  // No JSON Schema keyword says this; the description does.
  Schema.filter(isStorableText, { jsonSchema: {} })
).annotations({
  description: "The animal's name, 1 to 255 characters (UTF-16 code units) of Unicode text without U+0000.",
  examples: ["Rex"],
  message: () => ({ message: "must be a string of 1 to 255 characters of Unicode text without U+0000", override: true })
})

export const CategoryId = SafeInt.annotations({
  description: "Identifier of the category the animal belongs to.",
  examples: [3],
  format: "int64",
  message: () => ({ message: "must be an integer from -9007199254740991 to 9007199254740991", override: true })
})

const newPetFields = {
  name: PetName,
  categoryId: CategoryId,
  status: Schema.optionalWith(
    PetStatus.annotations({
      description: "Availability status; absent when none was given (there is no default).",
      examples: ["available"],
      message: () => ({ message: "must be one of available, pending, sold", override: true })
    }),
    { exact: true }
  )
}

/** The request body of createPet. A property the interface does not name is rejected. */
export const NewPet = Schema.Struct(newPetFields).annotations({
  identifier: "NewPet",
  description: "An animal to add to the store.",
  parseOptions: { onExcessProperty: "error" }
})
export type NewPet = typeof NewPet.Type

export const Pet = Schema.Struct({ id: PetId, ...newPetFields }).annotations({
  identifier: "Pet",
  description: "An animal as stored."
})
export type Pet = typeof Pet.Type

export const Pets = Schema.Array(Pet).annotations({
  identifier: "Pets",
  description: "A page of animals in ascending id order."
})
