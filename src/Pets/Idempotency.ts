import { Data } from "effect"
import { hash } from "node:crypto"
import { NewPet, type Pet } from "../Domain/Pet.js"

/** A create under an `Idempotency-Key`, scoped to the API key that sent it. */
export interface IdempotencyScope {
  readonly apiKeyId: number
  readonly key: string
}

/** What a reservation of an idempotency key found. */
export type Reservation =
  /**
   * The key is new (or its earlier request was abandoned): this request proceeds. `claimedAt`
   * identifies this claim of the key: only it can complete or release the record.
   */
  | { readonly _tag: "Reserved"; readonly claimedAt: number }
  /** An earlier request with this key created `pet` from a body with this fingerprint. */
  | { readonly _tag: "Completed"; readonly fingerprint: string; readonly pet: Pet }
  /** An earlier request with this key is still running. */
  | { readonly _tag: "InProgress" }

/**
 * The claim a create completes was taken over by a later request (the first outlived its
 * deadline, cut off by a database that went away): the create is rolled back, so one key never
 * makes two pets.
 */
export class ClaimTakenOver extends Data.TaggedError("ClaimTakenOver") {}

/** Idempotency records are kept this long (at least the 24 hours clients are promised). */
export const idempotencyRetentionMillis = 24 * 60 * 60 * 1000

/** How many of a body's fields always take part in its fingerprint: `NewPet`'s first three, as first recorded. */
const recordedFieldCount = 3

/**
 * What identifies a request body for an idempotency key: its decoded value, so spacing and key
 * order do not count. Every field of the schema takes part, in the schema's order, absent as null,
 * except absent fields at the end past the first three: a field added to the schema leaves the
 * fingerprint of a body without it as it was, so a retry of a create recorded before the field
 * existed still replays.
 */
export const fingerprintOf = (fields: ReadonlyArray<string>) => (body: { readonly [field: string]: unknown }) => {
  const values = fields.map((field) => body[field] ?? null)
  let length = values.length
  while (length > recordedFieldCount && values[length - 1] === null) length--
  return hash("sha256", JSON.stringify(values.slice(0, length)), "hex")
}

/** The fingerprint of a createPet body. */
export const fingerprint: (pet: NewPet) => string = fingerprintOf(Object.keys(NewPet.fields))
