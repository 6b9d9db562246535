import { Data } from "effect"
import type { Pet } from "../Domain/Pet.js"

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
