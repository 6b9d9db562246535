import { Context, Data, Effect, Layer, Option, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { hash, randomBytes } from "node:crypto"
import type { CurrentCaller } from "../Api/Authentication.js"
import { AppConfig, type Environment } from "../Config/AppConfig.js"
import { waitingOnDatabase } from "../Request/Unavailable.js"
import { unavailableOrDie } from "../Sql/DatabaseErrors.js"
import { RecentMap } from "./RecentMap.js"

export class ApiKeyRecord extends Schema.Class<ApiKeyRecord>("ApiKeyRecord")({
  id: Schema.Number,
  name: Schema.String,
  /** The first characters of the key, enough for a person to recognise it; never the key. */
  prefix: Schema.String,
  createdAt: Schema.DateFromString,
  revokedAt: Schema.OptionFromNullOr(Schema.DateFromString)
}) {}

export class ApiKeyNotFound extends Data.TaggedError("ApiKeyNotFound")<{ readonly id: number }> {
  override get message() {
    return `id: no API key has id ${this.id}`
  }
}

/** The key was revoked before; its first revocation time stands. */
export class ApiKeyAlreadyRevoked extends Data.TaggedError("ApiKeyAlreadyRevoked")<{ readonly record: ApiKeyRecord }> {
  override get message() {
    const revokedAt = Option.getOrThrow(this.record.revokedAt).toISOString()
    return `id: API key ${this.record.id} (${this.record.name}) was already revoked at ${revokedAt}`
  }
}

type FoundKey = { readonly holder: Option.Option<CurrentCaller["Service"]>; readonly until: number }

const environmentPrefix: Record<Environment, string> = { production: "ps_live_", staging: "ps_test_" }

/** A new key: the environment's prefix and 256 random bits; its first 12 characters are shown to people. */
const generateKey = (environment: Environment) => {
  const key = environmentPrefix[environment] + randomBytes(32).toString("base64url")
  return { key, prefix: key.slice(0, 12) }
}

/** Keys are stored and found only by this hash; the one-shot `hash`, lighter than a `createHash` object. */
export const hashKey = (key: string): string => hash("sha256", key, "hex")

/** The API keys that may call the service: a key is shown once, at its creation; the store keeps its SHA-256 hash. */
export class ApiKeys extends Context.Service<ApiKeys>()("petstore/ApiKeys", {
  /** In `api_keys`; a key found is trusted 0.5 s, sparing a lookup per request: revoked elsewhere, refused in 1 s. */
  make: Effect.gen(function*() {
    const { environment } = yield* AppConfig
    const sql = yield* SqlClient.SqlClient
    const columns = sql.literal("id, name, prefix, created_at, revoked_at")
    const recentlyFound = new RecentMap<FoundKey>(10_000, (entry, now) => entry.until <= now)
    return {
      create: (name: string) => {
        const { key, prefix } = generateKey(environment)
        return unavailableOrDie(Effect.map(
          sql`INSERT INTO api_keys (name, prefix, key_hash, created_at)
            VALUES (${name}, ${prefix}, ${hashKey(key)}, ${new Date().toISOString()})
            RETURNING ${columns}`,
          (rows) => ({ key: Redacted.make(key), record: toRecord(rows[0]) })
        ))
      },
      list: unavailableOrDie(
        Effect.map(sql`SELECT ${columns} FROM api_keys ORDER BY id`, (rows) => rows.map(toRecord))
      ),
      revoke: (id: number) =>
        Effect.gen(function*() {
          // Only an unrevoked key is updated: of two revocations one succeeds, the other keeps the first one's time.
          const [revoked] = yield* unavailableOrDie(
            sql`UPDATE api_keys SET revoked_at = ${new Date().toISOString()} WHERE id = ${id} AND revoked_at IS NULL
              RETURNING ${columns}`
          )
          if (revoked !== undefined) {
            // Revocations are rare: forgetting every key found costs each holder one lookup.
            recentlyFound.clear()
            return toRecord(revoked)
          }
          const [found] = yield* unavailableOrDie(sql`SELECT ${columns} FROM api_keys WHERE id = ${id}`)
          return yield* found === undefined
            ? new ApiKeyNotFound({ id })
            : new ApiKeyAlreadyRevoked({ record: toRecord(found) })
        }),
      findActiveByHash: (hash: string) =>
        Effect.clockWith((clock) => {
          const now = clock.currentTimeMillisUnsafe()
          const known = recentlyFound.get(hash)
          if (known !== undefined && known.until > now) return Effect.succeed(known.holder)
          const active = sql<{ id: unknown; name: string }>`SELECT id, name FROM api_keys
            WHERE key_hash = ${hash} AND revoked_at IS NULL`
          return Effect.map(waitingOnDatabase(unavailableOrDie(active)), ([row]) => {
            if (row === undefined) {
              recentlyFound.delete(hash)
              return Option.none()
            }
            const holder = Option.some({ keyId: Number(row.id), name: row.name })
            recentlyFound.set(hash, { holder, until: now + 500 }, now)
            return holder
          })
        })
    }
  })
}) {
  static readonly Sql = Layer.effect(ApiKeys, ApiKeys.make)

  static readonly InMemory = Layer.effect(
    ApiKeys,
    Effect.gen(function*() {
      const { environment } = yield* AppConfig
      const keys = new Map<number, { readonly record: ApiKeyRecord; readonly hash: string }>()
      return ApiKeys.of({
        create: (name) =>
          Effect.sync(() => {
            const { key, prefix } = generateKey(environment)
            const id = keys.size + 1
            const record = new ApiKeyRecord({ id, name, prefix, createdAt: new Date(), revokedAt: Option.none() })
            keys.set(id, { record, hash: hashKey(key) })
            return { key: Redacted.make(key), record }
          }),
        list: Effect.sync(() => Array.from(keys.values(), ({ record }) => record)),
        revoke: (id) =>
          Effect.gen(function*() {
            const found = keys.get(id)
            if (found === undefined) return yield* new ApiKeyNotFound({ id })
            if (Option.isSome(found.record.revokedAt)) return yield* new ApiKeyAlreadyRevoked({ record: found.record })
            const record = new ApiKeyRecord({ ...found.record, revokedAt: Option.some(new Date()) })
            keys.set(id, { ...found, record })
            return record
          }),
        findActiveByHash: (hash) =>
          Effect.sync(() => {
            const record = Array.from(keys.values()).find((entry) => entry.hash === hash)?.record
            return record === undefined || Option.isSome(record.revokedAt)
              ? Option.none()
              : Option.some({ keyId: record.id, name: record.name })
          })
      })
    })
  )
}

/** A row of `api_keys`, checked by the record: PostgreSQL gives bigints and Dates, SQLite numbers and text. */
const toRecord = (row: any): ApiKeyRecord =>
  new ApiKeyRecord({
    id: Number(row.id),
    name: row.name,
    prefix: row.prefix,
    createdAt: toDate(row.created_at),
    revokedAt: row.revoked_at === null ? Option.none() : Option.some(toDate(row.revoked_at))
  })

const toDate = (time: unknown): Date => time instanceof Date ? time : new Date(String(time))
