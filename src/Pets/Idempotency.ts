import { Data } from "effect"
import { hash } from "node:crypto"
import { NewPet, type Pet } from "../Domain/Pet.js"

/** A create under an `Idempotency-Key`, scoped to the API key that sent it. */
export interface IdempotencyScope {
  readonly apiKeyId: number
  readonly key: string
}

/** Reserved (new or abandoned) by the claim at `claimedAt`, the one that alone completes or releases it. */
export type Reservation =
  | { readonly _tag: "Reserved"; readonly claimedAt: number }
  | { readonly _tag: "Completed"; readonly fingerprint: string; readonly pet: Pet }
  | { readonly _tag: "InProgress" }

/** The claim was taken over by a later request (this one outlived its deadline): rolled back, one key, one pet. */
export class ClaimTakenOver extends Data.TaggedError("ClaimTakenOver") {}

/** Idempotency records are kept this long (at least the 24 hours clients are promised). */
export const idempotencyRetentionMillis = 24 * 60 * 60 * 1000

/** How many of a body's fields always take part in its fingerprint: `NewPet`'s first three, as first recorded. */
const recordedFieldCount = 3

/**
 * A body's identity for an idempotency key: decoded fields in the schema's order, absent as null, trailing absent ones
 * past the first three left out, so a field added to the schema leaves an older body's fingerprint as recorded.
 */
export const fingerprintOf = (fields: ReadonlyArray<string>) => (body: { readonly [field: string]: unknown }) => {
  const values = fields.map((field) => body[field] ?? null)
  let length = values.length
  while (length > recordedFieldCount && values[length - 1] === null) length--
  return hash("sha256", JSON.stringify(values.slice(0, length)), "hex")
}

export const fingerprint: (pet: NewPet) => string = fingerprintOf(Object.keys(NewPet.fields))
