import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Data, Effect, Layer, Option, Redacted, Ref, Schema } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { AppConfig, type Environment } from "../AppConfig.js"
import { Sqlite } from "../Sql/Database.js"
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

  /** Keys in the `api_keys` table of the SQLite database, through prepared statements. */
  static readonly Sqlite = Layer.effect(
    ApiKeys,
    Effect.gen(function*() {
      const { environment } = yield* AppConfig
      const db = yield* Sqlite
      const columns = "id, name, prefix, created_at AS createdAt, revoked_at AS revokedAt"
      const insert = db.query(
        `INSERT INTO api_keys (name, prefix, key_hash, created_at) VALUES (?, ?, ?, ?) RETURNING ${columns}`
      )
      const all = db.query(`SELECT ${columns} FROM api_keys ORDER BY id`)
      // Only an unrevoked key is updated, so of two revocations exactly one succeeds.
      const revoke = db.query(
        `UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL RETURNING ${columns}`
      )
      const byId = db.query(`SELECT ${columns} FROM api_keys WHERE id = ?`)
      const activeByHash = db.query<KeyHolder, [string]>(
        "SELECT id AS keyId, name FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL"
      )
      // A failing statement is a defect: nothing a caller could handle.
      return ApiKeys.of({
        create: (name) =>
          Effect.sync(() => {
            const key = generateKey(environment)
            // Writes run to their end (`all`), so SQLite's automatic checkpoint follows their commit.
            const [row] = insert.all(name, key.slice(0, shownPrefixLength), hashKey(key), new Date().toISOString())
            return { key: Redacted.make(key), record: decodeRecord(row) }
          }),
        list: Effect.sync(() => all.all().map((row) => decodeRecord(row))),
        revoke: (id) =>
          Effect.suspend(() => {
            const [revoked] = revoke.all(new Date().toISOString(), id)
            if (revoked !== undefined) return Effect.succeed(decodeRecord(revoked))
            const [found] = byId.all(id)
            return Effect.fail(
              found === undefined ? new ApiKeyNotFound({ id }) : new ApiKeyAlreadyRevoked({ record: decodeRecord(found) })
            )
          }),
        findActiveByHash: (hash) => Effect.sync(() => Option.fromNullable(activeByHash.get(hash)))
      })
    })
  )

  /**
   * Keys in the `api_keys` table of a PostgreSQL database shared by every instance. A valid key
   * found is trusted for half a second, so a key revoked on any instance is refused by every
   * instance within a second, and a new key works on all at once.
   */
  static readonly Postgres = Layer.effect(
    ApiKeys,
    Effect.gen(function*() {
      const { environment } = yield* AppConfig
      const sql = yield* PgClient.PgClient
      const columns = sql.literal("id, name, prefix, created_at, revoked_at")
      const decodePgRecord = (row: any) =>
        decodeRecord({
          id: Number(row.id),
          name: row.name,
          prefix: row.prefix,
          createdAt: row.created_at.toISOString(),
          revokedAt: row.revoked_at?.toISOString() ?? null
        })
      // Valid keys found lately, so a key's requests do not each wait for the database; unknown keys
      // are never kept, so a new key works at once.
      const recentlyFound = new RecentMap<{ readonly holder: Option.Option<KeyHolder>; readonly until: number }>(
        10_000,
        (entry, now) => entry.until <= now
      )
      // A failing statement is a defect: nothing a caller could handle.
      return ApiKeys.of({
        create: (name) => {
          const key = generateKey(environment)
          return sql`INSERT INTO api_keys (name, prefix, key_hash, created_at)
            VALUES (${name}, ${key.slice(0, shownPrefixLength)}, ${hashKey(key)}, now()) RETURNING ${columns}`.pipe(
            Effect.map(([row]) => ({ key: Redacted.make(key), record: decodePgRecord(row) })),
            Effect.orDie
          )
        },
        list: Effect.orDie(Effect.map(sql`SELECT ${columns} FROM api_keys ORDER BY id`, (rows) => rows.map(decodePgRecord))),
        revoke: (id) =>
          Effect.gen(function*() {
            // Only an unrevoked key is updated, so of two revocations exactly one succeeds.
            const [revoked] = yield* sql`UPDATE api_keys SET revoked_at = now()
              WHERE id = ${id} AND revoked_at IS NULL RETURNING ${columns}`
            if (revoked !== undefined) return decodePgRecord(revoked)
            const [found] = yield* sql`SELECT ${columns} FROM api_keys WHERE id = ${id}`
            return yield* found === undefined
              ? new ApiKeyNotFound({ id })
              : new ApiKeyAlreadyRevoked({ record: decodePgRecord(found) })
          }).pipe(Effect.catchTag("SqlError", Effect.die)),
        findActiveByHash: (hash) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) => {
            const known = recentlyFound.get(hash)
            if (known !== undefined && known.until > now) return Effect.succeed(known.holder)
            return sql<{ id: string; name: string }>`SELECT id, name FROM api_keys WHERE key_hash = ${hash} AND revoked_at IS NULL`.pipe(
              Effect.map((rows) => Option.fromNullable(rows[0]).pipe(Option.map(({ id, name }) => ({ keyId: Number(id), name })))),
              Effect.tap((holder) => {
                if (Option.isSome(holder)) recentlyFound.set(hash, { holder, until: now + foundKeyMillis }, now)
                else recentlyFound.delete(hash)
              }),
              Effect.orDie
            )
          })
      })
    })
  )
}

const decodeRecord = Schema.decodeUnknownSync(ApiKeyRecord)

/** How long an instance on PostgreSQL trusts a valid key it looked up, without asking again. */
const foundKeyMillis = 500
