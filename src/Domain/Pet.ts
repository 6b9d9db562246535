import { Order, Schema, type SchemaAST, SchemaTransformation } from "effect"

/** One `message` on a schema and each of its checks, so whichever fails the answer words the same rule. */
const rule = (message: string) => ({ message })

const safeIntegerMessage = "must be an integer from -9007199254740991 to 9007199254740991"

/** A decimal integer in a path or query, spelled one way (no `+`, leading zeros, `-0`): one URL per resource. */
export const DecimalIntFromString = (message: string, ...checks: Array<SchemaAST.Check<number>>) =>
  Schema.String.annotate(rule(message)).check(Schema.isPattern(/^(?:0|-?[1-9][0-9]{0,15})$/, rule(message))).pipe(
    Schema.decodeTo(
      Schema.Number.annotate(rule(message)).check(Schema.isInt(rule(message)), ...checks),
      SchemaTransformation.numberFromString
    )
  )

/** Schema's arbitraries draw the whole safe range (unbounded, only small integers near zero). */
const safeIntegers = {
  number: "integer",
  order: Order.Number,
  minimum: Number.MIN_SAFE_INTEGER,
  maximum: Number.MAX_SAFE_INTEGER
} as const

/** An integer a JSON client can carry without rounding: larger values are rejected, never rounded. */
const SafeInt = (annotations: Schema.Annotations.Bottom<number, readonly []>) =>
  Schema.Number.annotate(annotations).check(
    Schema.isInt({ ...rule(annotations.message ?? safeIntegerMessage), arbitraryConstraint: safeIntegers })
  )

export const PetId = SafeInt({
  description: "Unique identifier of an animal, assigned by the service on creation; never reused.",
  examples: [1],
  format: "int64"
}).annotate({ identifier: "PetId" })
export type PetId = typeof PetId.Type

const statusMessage = "must be one of available, pending, sold"

export const PetStatus = Schema.Literals(["available", "pending", "sold"]).annotate({
  description: "Availability status of an animal.",
  ...rule(statusMessage)
})
export type PetStatus = typeof PetStatus.Type

/** Text every store keeps as it came: no lone surrogate (no UTF-8 form), no U+0000 (PostgreSQL text cannot hold it). */
const isStorableText = (text: string) => text.isWellFormed() && !text.includes("\u0000")

/** Schema's arbitraries draw storable text from every plane (by default printable ASCII only). */
const storableTextPattern = {
  source: "^(?:[\\u0001-\\u007F]|[\\u0080-\\uD7FF\\uE000-\\uFFFF]|[\\u{10000}-\\u{10FFFF}])*$",
  flags: "u"
}

const nameMessage = "must be a string of 1 to 255 characters of Unicode text without U+0000"

export const PetName = Schema.String.annotate({
  description: "The animal's name, 1 to 255 characters (UTF-16 code units) of Unicode text without U+0000.",
  examples: ["Rex"],
  ...rule(nameMessage)
}).check(
  Schema.isMinLength(1, rule(nameMessage)),
  Schema.isMaxLength(255, rule(nameMessage)),
  // No JSON Schema keyword says this; the description does.
  Schema.makeFilter(isStorableText, {
    ...rule(nameMessage),
    toJsonSchema: () => ({}),
    arbitraryConstraint: { patterns: [storableTextPattern] }
  })
)

export const CategoryId = SafeInt({
  description: "Identifier of the category the animal belongs to.",
  examples: [3],
  format: "int64",
  ...rule(safeIntegerMessage)
})

const newPetFields = {
  name: PetName.annotateKey({ messageMissingKey: "is missing" }),
  categoryId: CategoryId.annotateKey({ messageMissingKey: "is missing" }),
  // Absent or one of the values: `null` is refused like any other value.
  status: Schema.optionalKey(PetStatus.annotate({
    description: "Availability status; absent when none was given (there is no default).",
    examples: ["available"]
  }))
}

/** createPet's body; a property it does not name is refused when decoded with `newPetParseOptions`. */
export const NewPet = Schema.Struct(newPetFields).annotate({
  identifier: "NewPet",
  description: "An animal to add to the store.",
  messageUnexpectedKey: `is unexpected, expected: ${Object.keys(newPetFields).map((key) => `"${key}"`).join(" | ")}`
})
export type NewPet = typeof NewPet.Type

export const newPetParseOptions = { onExcessProperty: "error" } as const

export const Pet = Schema.Struct({ id: PetId, ...newPetFields }).annotate({
  identifier: "Pet",
  description: "An animal as stored."
})
export type Pet = typeof Pet.Type

export const Pets = Schema.Array(Pet).annotate({
  identifier: "Pets",
  description: "A page of animals in ascending id order."
})
