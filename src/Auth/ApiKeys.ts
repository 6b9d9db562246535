import { SqlClient, SqlSchema } from "@effect/sql"
import { Context, Effect, Layer, Option, Redacted, Ref, Schema } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { AppConfig, type Environment } from "../AppConfig.js"

export class ApiKeyRecord extends Schema.Class<ApiKeyRecord>("ApiKeyRecord")({
  id: Schema.Number,
  name: Schema.String,
  /** The first characters of the key, enough for a person to recognise it; never the key. */
  prefix: Schema.String,
  createdAt: Schema.Date,
  revokedAt: Schema.OptionFromNullOr(Schema.Date)
}) {}

/** Who holds a valid key: what authentication hands to handlers. */
export interface KeyHolder {
  readonly keyId: number
  readonly name: string
}

const environmentPrefix: Record<Environment, string> = { production: "ps_live_", staging: "ps_test_" }
const shownPrefixLength = 12

/** A new key: the environment's prefix and 256 random bits. */
export const generateKey = (environment: Environment): string =>
  environmentPrefix[environment] + randomBytes(32).toString("base64url")

/** Keys are stored and looked up only by this hash. */
export const hashKey = (key: string): string => createHash("sha256").update(key).digest("hex")

/**
 * The API keys that may call the service. A key is shown once, when it is created; the store keeps
 * only its SHA-256 hash.
 */
export class ApiKeys extends Context.Tag("petstore/ApiKeys")<
  ApiKeys,
  {
    readonly create: (name: string) => Effect.Effect<{ readonly key: Redacted.Redacted; readonly record: ApiKeyRecord }>
    readonly list: Effect.Effect<ReadonlyArray<ApiKeyRecord>>
    /** Revokes a key; `None` when no key has that id. */
    readonly revoke: (id: number) => Effect.Effect<Option.Option<ApiKeyRecord>>
    /** The holder of an unrevoked key with this hash. */
    readonly findActiveByHash: (hash: string) => Effect.Effect<Option.Option<KeyHolder>>
  }
>() {
  static readonly InMemory = Layer.effect(
    ApiKeys,
    Effect.gen(function*() {
      const { environment } = yield* AppConfig
      const keys = yield* Ref.make<ReadonlyArray<{ readonly record: ApiKeyRecord; readonly hash: string }>>([])
      return ApiKeys.of({
        create: (name) => {
          const key = generateKey(environment)
          return Ref.modify(keys, (all) => {
            const record = new ApiKeyRecord({
              id: all.length + 1,
              name,
              prefix: key.slice(0, shownPrefixLength),
              createdAt: new Date(),
              revokedAt: Option.none()
            })
            return [{ key: Redacted.make(key), record }, [...all, { record, hash: hashKey(key) }]]
          })
        },
        list: Effect.map(Ref.get(keys), (all) => all.map(({ record }) => record)),
        revoke: (id) =>
          Ref.modify(keys, (all) => {
            const found = all.find(({ record }) => record.id === id)
            if (found === undefined) return [Option.none(), all]
            const record = Option.isSome(found.record.revokedAt)
              ? found.record
              : new ApiKeyRecord({ ...found.record, revokedAt: Option.some(new Date()) })
            return [Option.some(record), all.map((entry) => entry === found ? { ...entry, record } : entry)]
          }),
        findActiveByHash: (hash) =>
          Effect.map(Ref.get(keys), (all) =>
            Option.fromNullable(all.find((entry) => entry.hash === hash && Option.isNone(entry.record.revokedAt))).pipe(
              Option.map(({ record }) => ({ keyId: record.id, name: record.name }))
            ))
      })
    })
  )

  /** Keys in the `api_keys` table of the SQL database. */
  static readonly Sql = Layer.effect(
    ApiKeys,
    Effect.gen(function*() {
      const { environment } = yield* AppConfig
      const sql = yield* SqlClient.SqlClient
      const columns = sql`id, name, prefix, created_at AS "createdAt", revoked_at AS "revokedAt"`

      const insert = SqlSchema.single({
        Request: Schema.Struct({ name: Schema.String, prefix: Schema.String, hash: Schema.String }),
        Result: ApiKeyRecord,
        execute: ({ hash, name, prefix }) =>
          sql`INSERT INTO api_keys (name, prefix, key_hash, created_at)
              VALUES (${name}, ${prefix}, ${hash}, ${new Date().toISOString()})
              RETURNING ${columns}`
      })
      const all = SqlSchema.findAll({
        Request: Schema.Void,
        Result: ApiKeyRecord,
        execute: () => sql`SELECT ${columns} FROM api_keys ORDER BY id`
      })
      const revoke = SqlSchema.findOne({
        Request: Schema.Number,
        Result: ApiKeyRecord,
        execute: (id) =>
          sql`UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ${new Date().toISOString()})
              WHERE id = ${id} RETURNING ${columns}`
      })
      const activeByHash = SqlSchema.findOne({
        Request: Schema.String,
        Result: Schema.Struct({ keyId: Schema.Number, name: Schema.String }),
        execute: (hash) =>
          sql`SELECT id AS "keyId", name FROM api_keys WHERE key_hash = ${hash} AND revoked_at IS NULL`
      })

      return ApiKeys.of({
        create: (name) => {
          const key = generateKey(environment)
          return insert({ name, prefix: key.slice(0, shownPrefixLength), hash: hashKey(key) }).pipe(
            Effect.map((record) => ({ key: Redacted.make(key), record })),
            Effect.orDie
          )
        },
        list: Effect.orDie(all(undefined)),
        revoke: (id) => Effect.orDie(revoke(id)),
        findActiveByHash: (hash) => Effect.orDie(activeByHash(hash))
      })
    })
  )
}
