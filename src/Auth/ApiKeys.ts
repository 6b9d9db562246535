import { SqlClient, SqlSchema } from "@effect/sql"
import { Clock, Context, Data, Effect, Layer, Option, Redacted, Ref, Schema } from "effect"
import { hash, randomBytes } from "node:crypto"
import { AppConfig, type Environment } from "../Config/AppConfig.js"
import { rowsOrDie } from "../Sql/DirectStatements.js"
import { RecentMap } from "./RecentMap.js"

export class ApiKeyRecord extends Schema.Class<ApiKeyRecord>("ApiKeyRecord")({
  id: Schema.Number,
  name: Schema.String,
  /** The first characters of the key, enough for a person to recognise it; never the key. */
  prefix: Schema.String,
  createdAt: Schema.Date,
  revokedAt: Schema.OptionFromNullOr(Schema.Date)
}) {}

/** No key has the id a revocation named. */
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

/** Who holds a valid key: what authentication hands to handlers. */
export interface KeyHolder {
  readonly keyId: number
  readonly name: string
}

type Revocation = Effect.Effect<ApiKeyRecord, ApiKeyNotFound | ApiKeyAlreadyRevoked>

/** A key as the in-memory store keeps it: its record and hash. */
interface StoredKey {
  readonly record: ApiKeyRecord
  readonly hash: string
}

const environmentPrefix: Record<Environment, string> = { production: "ps_live_", staging: "ps_test_" }
const shownPrefixLength = 12

/** A new key: the environment's prefix and 256 random bits. */
export const generateKey = (environment: Environment): string =>
  environmentPrefix[environment] + randomBytes(32).toString("base64url")

/**
 * Keys are stored and looked up only by this hash. Once per authenticated request: the one-shot
 * `hash` costs about 0.3 µs where a `createHash` object costs 0.7–1.3.
 */
export const hashKey = (key: string): string => hash("sha256", key, "hex")

/**
 * The API keys that may call the service. A key is shown once, when it is created; the store keeps
 * only its SHA-256 hash.
 */
export class ApiKeys extends Context.Tag("petstore/ApiKeys")<
  ApiKeys,
  {
    readonly create: (name: string) => Effect.Effect<{ readonly key: Redacted.Redacted; readonly record: ApiKeyRecord }>
    readonly list: Effect.Effect<ReadonlyArray<ApiKeyRecord>>
    /** Revokes a key, once: a second revocation fails and keeps the first one's time. */
    readonly revoke: (id: number) => Effect.Effect<ApiKeyRecord, ApiKeyNotFound | ApiKeyAlreadyRevoked>
    /** The holder of an unrevoked key with this hash. */
    readonly findActiveByHash: (hash: string) => Effect.Effect<Option.Option<KeyHolder>>
  }
>() {
  static readonly InMemory = Layer.effect(
    ApiKeys,
    Effect.gen(function*() {
      const { environment } = yield* AppConfig
      const keys = yield* Ref.make<ReadonlyArray<StoredKey>>([])
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
          Effect.flatten(Ref.modify(keys, (all): readonly [Revocation, ReadonlyArray<StoredKey>] => {
            const found = all.find(({ record }) => record.id === id)
            if (found === undefined) return [Effect.fail(new ApiKeyNotFound({ id })), all]
            if (Option.isSome(found.record.revokedAt)) {
              return [Effect.fail(new ApiKeyAlreadyRevoked({ record: found.record })), all]
            }
            const record = new ApiKeyRecord({ ...found.record, revokedAt: Option.some(new Date()) })
            return [Effect.succeed(record), all.map((entry) => entry === found ? { ...entry, record } : entry)]
          })),
        findActiveByHash: (hash) =>
          Effect.map(Ref.get(keys), (all) =>
            Option.fromNullable(all.find((entry) => entry.hash === hash && Option.isNone(entry.record.revokedAt))).pipe(
              Option.map(({ record }) => ({ keyId: record.id, name: record.name }))
            ))
      })
    })
  )

  /**
   * Keys in the `api_keys` table, on SQLite or PostgreSQL alike. On PostgreSQL, shared by every
   * instance, a valid key found is trusted for half a second, so a key's requests do not each wait
   * for the network, and a key revoked on any instance is refused by every instance within a
   * second; on SQLite each lookup is a local read, so a revoked key is refused from the next
   * request on. Unknown keys are never kept, so a new key works at once.
   */
  static readonly Sql = Layer.effect(
    ApiKeys,
    Effect.gen(function*() {
      const { environment } = yield* AppConfig
      const sql = yield* SqlClient.SqlClient
      const columns = sql.literal("id, name, prefix, created_at, revoked_at")
      // How long a valid key found is trusted without asking again.
      const trustFoundKeysMillis = sql.onDialectOrElse({ pg: () => 500, orElse: () => 0 })
      const insert = SqlSchema.single({
        Request: Schema.Struct({ name: Schema.String, prefix: Schema.String, hash: Schema.String, at: Schema.String }),
        Result: ApiKeyRow,
        execute: ({ at, hash, name, prefix }) =>
          sql`INSERT INTO api_keys (name, prefix, key_hash, created_at) VALUES (${name}, ${prefix}, ${hash}, ${at})
            RETURNING ${columns}`
      })
      const all = SqlSchema.findAll({
        Request: Schema.Void,
        Result: ApiKeyRow,
        execute: () => sql`SELECT ${columns} FROM api_keys ORDER BY id`
      })
      // Only an unrevoked key is updated, so of two revocations exactly one succeeds.
      const revoke = SqlSchema.findOne({
        Request: Schema.Struct({ id: Schema.Number, at: Schema.String }),
        Result: ApiKeyRow,
        execute: ({ at, id }) =>
          sql`UPDATE api_keys SET revoked_at = ${at} WHERE id = ${id} AND revoked_at IS NULL RETURNING ${columns}`
      })
      const byId = SqlSchema.findOne({
        Request: Schema.Number,
        Result: ApiKeyRow,
        execute: (id) => sql`SELECT ${columns} FROM api_keys WHERE id = ${id}`
      })
      const recentlyFound = new RecentMap<{ readonly holder: Option.Option<KeyHolder>; readonly until: number }>(
        10_000,
        (entry, now) => entry.until <= now
      )
      const activeByHash = (hash: string) =>
        rowsOrDie(
          sql<{ id: unknown; name: string }>`SELECT id, name FROM api_keys WHERE key_hash = ${hash} AND revoked_at IS NULL`,
          (rows): Option.Option<KeyHolder> =>
            rows.length === 0 ? Option.none() : Option.some({ keyId: Number(rows[0]!.id), name: rows[0]!.name })
        )
      // A failing statement is a defect: nothing a caller could handle.
      return ApiKeys.of({
        create: (name) => {
          const key = generateKey(environment)
          return insert({ name, prefix: key.slice(0, shownPrefixLength), hash: hashKey(key), at: new Date().toISOString() }).pipe(
            Effect.map((record) => ({ key: Redacted.make(key), record })),
            Effect.orDie
          )
        },
        list: Effect.orDie(all(undefined)),
        revoke: (id) =>
          Effect.gen(function*() {
            const revoked = yield* revoke({ id, at: new Date().toISOString() })
            if (Option.isSome(revoked)) return revoked.value
            const found = yield* byId(id)
            return yield* Option.isNone(found)
              ? new ApiKeyNotFound({ id })
              : new ApiKeyAlreadyRevoked({ record: found.value })
          }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die })),
        findActiveByHash: (hash) =>
          trustFoundKeysMillis === 0 ? activeByHash(hash) : Effect.flatMap(Clock.currentTimeMillis, (now) => {
            const known = recentlyFound.get(hash)
            if (known !== undefined && known.until > now) return Effect.succeed(known.holder)
            return activeByHash(hash).pipe(
              Effect.tap((holder) => {
                if (Option.isSome(holder)) recentlyFound.set(hash, { holder, until: now + trustFoundKeysMillis }, now)
                else recentlyFound.delete(hash)
              })
            )
          })
      })
    })
  )
}

/** A time as the table gives it back: a Date from PostgreSQL, ISO 8601 text from SQLite. */
const TimeColumn = Schema.Union(Schema.DateFromSelf, Schema.Date)

/** A row of `api_keys` as the key's record; PostgreSQL gives BIGINT ids as decimal text. */
const ApiKeyRow = Schema.transform(
  Schema.Struct({
    id: Schema.Union(Schema.Number, Schema.NumberFromString),
    name: Schema.String,
    prefix: Schema.String,
    created_at: TimeColumn,
    revoked_at: Schema.NullOr(TimeColumn)
  }),
  Schema.typeSchema(ApiKeyRecord),
  {
    strict: true,
    decode: (row) =>
      new ApiKeyRecord({
        id: row.id,
        name: row.name,
        prefix: row.prefix,
        createdAt: row.created_at,
        revokedAt: Option.fromNullable(row.revoked_at)
      }),
    encode: (record) => ({
      id: record.id,
      name: record.name,
      prefix: record.prefix,
      created_at: record.createdAt,
      revoked_at: Option.getOrNull(record.revokedAt)
    })
  }
)
