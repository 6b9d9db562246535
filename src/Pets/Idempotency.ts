import type { Pet } from "../Domain/Pet.js"

/** A create under an `Idempotency-Key`, scoped to the API key that sent it. */
export interface IdempotencyScope {
  readonly apiKeyId: number
  readonly key: string
}

/** What a reservation of an idempotency key found. */
export type Reservation =
  /** The key is new (or its earlier request was abandoned): this request proceeds. */
  | { readonly _tag: "Reserved" }
  /** An earlier request with this key created `pet` from a body with this fingerprint. */
  | { readonly _tag: "Completed"; readonly fingerprint: string; readonly pet: Pet }
  /** An earlier request with this key is still running. */
  | { readonly _tag: "InProgress" }

/** Idempotency records are kept this long (at least the 24 hours clients are promised). */
export const idempotencyRetentionMillis = 24 * 60 * 60 * 1000
/** A reservation older than this was abandoned (its process stopped mid-request). */
export const abandonedReservationMillis = 60 * 1000
