import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"
import { BadRequest } from "../Domain/ApiError.js"
import type { PetId, PetStatus } from "../Domain/Pet.js"
import { unavailableOrDie } from "../Sql/DatabaseErrors.js"

/** Last id served and status filter, signed: a tampered cursor, or one reused with another filter, is refused. */
export class Cursors extends Context.Service<Cursors, {
  readonly encode: (position: { readonly afterId: PetId; readonly status: PetStatus | undefined }) => string
  /** The id the page starts after, if the cursor was issued for this status filter. */
  readonly decode: (cursor: string, status: PetStatus | undefined) => Effect.Effect<PetId, BadRequest>
}>()("petstore/Cursors") {
  static readonly make = (secret: Uint8Array) => {
    const sign = (payload: string) => createHmac("sha256", secret).update(payload).digest().subarray(0, 16)
    const invalid = new BadRequest({
      code: "invalid_cursor",
      message: "cursor: is not a cursor this service issued for this status filter",
      status: 400
    })
    const encode: Cursors["Service"]["encode"] = ({ afterId, status }) => {
      const payload = `${afterId}.${status ?? ""}`
      return `${Buffer.from(payload).toString("base64url")}.${sign(payload).toString("base64url")}`
    }
    return Cursors.of({
      encode,
      decode: (cursor, status) => {
        const [encodedPayload = "", encodedSignature = ""] = cursor.split(".")
        const payload = Buffer.from(encodedPayload, "base64url").toString()
        const signature = Buffer.from(encodedSignature, "base64url")
        const expected = sign(payload)
        const signed = signature.length === expected.length && timingSafeEqual(signature, expected)
        const afterId = Number(payload.split(".")[0])
        // Base64 decoding forgives padding, `+`/`/` and unused bits: only the spelling issued is accepted.
        return signed && encode({ afterId, status }) === cursor ? Effect.succeed(afterId) : Effect.fail(invalid)
      }
    })
  }

  /** A secret of this process alone: cursors do not outlive it. */
  static readonly InMemory = Layer.sync(Cursors, () => Cursors.make(randomBytes(32)))

  /** The secret kept in the database, so cursors survive restarts and work on every instance. */
  static readonly Sql = Layer.effect(
    Cursors,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* unavailableOrDie(
        sql<{ value: string }>`SELECT value FROM settings WHERE name = 'cursor_secret'`
      )
      return row === undefined
        ? yield* Effect.die(new Error("The settings table has no cursor_secret: the migrations did not run"))
        : Cursors.make(Buffer.from(row.value, "hex"))
    })
  )
}
