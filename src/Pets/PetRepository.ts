import type { SqlError } from "@effect/sql/SqlError"
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Effect, Layer, Option, Ref, Schedule } from "effect"
import type { NewPet, Pet, PetId } from "../Domain/Pet.js"
import { PetStatus } from "../Domain/Pet.js"
import { Sqlite } from "../Sql/Database.js"

export interface PetQuery {
  readonly status?: PetStatus | undefined
  /** Only pets with a larger id: the position a cursor carries. */
  readonly afterId?: PetId | undefined
  readonly limit: number
}

export interface PetPage {
  readonly pets: ReadonlyArray<Pet>
  /** Whether more pets match beyond this page. */
  readonly hasMore: boolean
}

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

/** Where the animals are kept. Ids are assigned by the store, ascending, and never reused. */
export class PetRepository extends Context.Tag("petstore/PetRepository")<
  PetRepository,
  {
    readonly create: (pet: NewPet) => Effect.Effect<Pet>
    readonly findById: (id: PetId) => Effect.Effect<Option.Option<Pet>>
    readonly list: (query: PetQuery) => Effect.Effect<PetPage>
    /** Claims an idempotency key before its request's body is read. */
    readonly reserve: (scope: IdempotencyScope) => Effect.Effect<Reservation>
    /** Gives back a reservation whose request failed before creating anything. */
    readonly release: (scope: IdempotencyScope) => Effect.Effect<void>
    /** Creates the pet and completes the reservation in one transaction. */
    readonly createOnce: (scope: IdempotencyScope, fingerprint: string, pet: NewPet) => Effect.Effect<Pet>
    /** Whether the store answers, for the readiness probe. */
    readonly isReady: Effect.Effect<boolean>
  }
>() {
  /** Pets in the process's memory, for tests and for composing without a database. */
  static readonly InMemory = Layer.effect(
    PetRepository,
    Effect.gen(function*() {
      const state = yield* Ref.make({ lastId: 0, pets: [] as ReadonlyArray<Pet> })
      const records = new Map<string, { fingerprint?: string; pet?: Pet; createdAt: number }>()
      const recordKey = ({ apiKeyId, key }: IdempotencyScope) => `${apiKeyId}\u0000${key}`
      const create = (newPet: NewPet) =>
        Ref.modify(state, ({ lastId, pets }) => {
          const pet: Pet = { id: lastId + 1, ...newPet }
          return [pet, { lastId: pet.id, pets: [...pets, pet] }]
        })
      return PetRepository.of({
        create,
        reserve: (scope) =>
          Effect.map(Clock.currentTimeMillis, (now): Reservation => {
            for (const [key, record] of records) {
              if (record.createdAt < now - idempotencyRetentionMillis) records.delete(key)
            }
            const record = records.get(recordKey(scope))
            if (record?.pet !== undefined) return { _tag: "Completed", fingerprint: record.fingerprint!, pet: record.pet }
            if (record !== undefined && now - record.createdAt <= abandonedReservationMillis) return { _tag: "InProgress" }
            records.set(recordKey(scope), { createdAt: now })
            return { _tag: "Reserved" }
          }),
        release: (scope) =>
          Effect.sync(() => {
            if (records.get(recordKey(scope))?.pet === undefined) records.delete(recordKey(scope))
          }),
        createOnce: (scope, fingerprint, newPet) =>
          Effect.tap(create(newPet), (pet) => {
            const record = records.get(recordKey(scope))
            if (record !== undefined) Object.assign(record, { fingerprint, pet })
          }),
        findById: (id) => Effect.map(Ref.get(state), ({ pets }) => Option.fromNullable(pets.find((pet) => pet.id === id))),
        list: ({ afterId, limit, status }) =>
          Effect.map(Ref.get(state), ({ pets }) => {
            const matching = pets.filter((pet) =>
              (afterId === undefined || pet.id > afterId) && (status === undefined || pet.status === status)
            )
            return { pets: matching.slice(0, limit), hasMore: matching.length > limit }
          }),
        isReady: Effect.succeed(true)
      })
    })
  )

  /** Pets in the `pets` table of the SQLite database, through prepared statements. */
  static readonly Sqlite = Layer.effect(
    PetRepository,
    Effect.map(Sqlite, (db) => {
      const columns = "id, name, category_id, status"
      const insert = db.query(`INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING ${columns}`)
      const byId = db.query(`SELECT ${columns} FROM pets WHERE id = ?`)
      const page = db.query(`SELECT ${columns} FROM pets WHERE id > ? ORDER BY id LIMIT ?`)
      const pageByStatus = db.query(`SELECT ${columns} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`)
      const ping = db.query("SELECT 1")
      const purgeRecords = db.query("DELETE FROM idempotency_keys WHERE created_at < ?")
      const findRecord = db.query<{ fingerprint: string | null; pet_id: number | null; created_at: number }, [number, string]>(
        "SELECT fingerprint, pet_id, created_at FROM idempotency_keys WHERE api_key_id = ? AND idempotency_key = ?"
      )
      const claimRecord = db.query(
        `INSERT INTO idempotency_keys (api_key_id, idempotency_key, created_at) VALUES (?, ?, ?)
         ON CONFLICT (api_key_id, idempotency_key) DO UPDATE SET created_at = excluded.created_at`
      )
      const releaseRecord = db.query(
        "DELETE FROM idempotency_keys WHERE api_key_id = ? AND idempotency_key = ? AND pet_id IS NULL"
      )
      const completeRecord = db.query(
        "UPDATE idempotency_keys SET fingerprint = ?, pet_id = ? WHERE api_key_id = ? AND idempotency_key = ?"
      )
      // `all`, not `get`: a write statement left before its end skips SQLite's automatic checkpoint,
      // and the WAL would then grow with every create until the process stops.
      const insertPet = (pet: NewPet) => toPets(insert.all(pet.name, pet.categoryId, pet.status ?? null))[0]!
      const reserve = db.transaction(({ apiKeyId, key }: IdempotencyScope, now: number): Reservation => {
        purgeRecords.run(now - idempotencyRetentionMillis)
        const record = findRecord.get(apiKeyId, key)
        if (record?.pet_id != null) {
          return { _tag: "Completed", fingerprint: record.fingerprint!, pet: toPets([byId.get(record.pet_id)])[0]! }
        }
        if (record !== null && now - record.created_at <= abandonedReservationMillis) return { _tag: "InProgress" }
        claimRecord.run(apiKeyId, key, now)
        return { _tag: "Reserved" }
      })
      const createOnce = db.transaction(({ apiKeyId, key }: IdempotencyScope, fingerprint: string, newPet: NewPet) => {
        const pet = insertPet(newPet)
        completeRecord.run(fingerprint, pet.id, apiKeyId, key)
        return pet
      })
      // A failing statement is a defect: nothing a caller could handle.
      return PetRepository.of({
        create: (pet) => Effect.sync(() => insertPet(pet)),
        // IMMEDIATE: the reservation's read and write hold the write lock together, across processes too.
        reserve: (scope) => Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => reserve.immediate(scope, now))),
        release: ({ apiKeyId, key }) => Effect.sync(() => void releaseRecord.run(apiKeyId, key)),
        createOnce: (scope, fingerprint, pet) => Effect.sync(() => createOnce(scope, fingerprint, pet)),
        findById: (id) =>
          Effect.sync(() => {
            const row = byId.get(id)
            return row === null ? Option.none() : Option.some(toPets([row])[0]!)
          }),
        list: ({ afterId = 0, limit, status }) =>
          Effect.sync(() => {
            // One row more than the page tells whether another page follows.
            const rows = status === undefined ? page.all(afterId, limit + 1) : pageByStatus.all(status, afterId, limit + 1)
            const pets = toPets(rows)
            return { pets: pets.slice(0, limit), hasMore: pets.length > limit }
          }),
        isReady: Effect.sync(() => ping.get() !== null).pipe(Effect.catchAllDefect(() => Effect.succeed(false)))
      })
    })
  )

  /**
   * Pets in the `pets` table of a PostgreSQL database shared by every instance. A reservation is
   * one statement (insert, or take over an expired or abandoned record), so two instances racing
   * for a key cannot both win.
   */
  static readonly Postgres = Layer.scoped(
    PetRepository,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const columns = sql.literal("id, name, category_id, status")
      const insertPet = ({ categoryId, name, status }: NewPet) =>
        Effect.map(
          sql`INSERT INTO pets (name, category_id, status) VALUES (${name}, ${categoryId}, ${status ?? null})
              RETURNING ${columns}`,
          (rows) => fromPgRows(rows)[0]!
        )
      const findRecord = ({ apiKeyId, key }: IdempotencyScope) =>
        sql<{ fingerprint: string | null; created_at: string; id: string | null }>`
          SELECT r.fingerprint, r.created_at, p.id, p.name, p.category_id, p.status
          FROM idempotency_keys r LEFT JOIN pets p ON p.id = r.pet_id
          WHERE r.api_key_id = ${apiKeyId} AND r.idempotency_key = ${key}`
      const reserve = (scope: IdempotencyScope, now: number): Effect.Effect<Reservation, SqlError> =>
        Effect.gen(function*() {
          const claimed = yield* sql`
            INSERT INTO idempotency_keys AS r (api_key_id, idempotency_key, created_at)
            VALUES (${scope.apiKeyId}, ${scope.key}, ${now})
            ON CONFLICT (api_key_id, idempotency_key) DO UPDATE
              SET created_at = excluded.created_at, fingerprint = NULL, pet_id = NULL
              WHERE r.created_at < ${now - idempotencyRetentionMillis}
                OR (r.pet_id IS NULL AND r.created_at < ${now - abandonedReservationMillis})
            RETURNING 1`
          if (claimed.length > 0) return { _tag: "Reserved" }
          const [record] = yield* findRecord(scope)
          // Released between the two statements: claim it again.
          if (record === undefined) return yield* reserve(scope, now)
          return record.id === null
            ? { _tag: "InProgress" }
            : { _tag: "Completed", fingerprint: record.fingerprint!, pet: fromPgRows([record])[0]! }
        })
      const purgeExpired = Effect.flatMap(
        Clock.currentTimeMillis,
        (now) => sql`DELETE FROM idempotency_keys WHERE created_at < ${now - idempotencyRetentionMillis}`
      )
      yield* purgeExpired.pipe(Effect.repeat(Schedule.spaced("1 minute")), Effect.ignoreLogged, Effect.forkScoped)
      // A failing statement is a defect: nothing a caller could handle.
      return PetRepository.of({
        create: (pet) => Effect.orDie(insertPet(pet)),
        reserve: (scope) => Effect.orDie(Effect.flatMap(Clock.currentTimeMillis, (now) => reserve(scope, now))),
        release: ({ apiKeyId, key }) =>
          Effect.orDie(sql`DELETE FROM idempotency_keys
            WHERE api_key_id = ${apiKeyId} AND idempotency_key = ${key} AND pet_id IS NULL`),
        createOnce: ({ apiKeyId, key }, fingerprint, newPet) =>
          insertPet(newPet).pipe(
            Effect.tap((pet) =>
              sql`UPDATE idempotency_keys SET fingerprint = ${fingerprint}, pet_id = ${pet.id}
                  WHERE api_key_id = ${apiKeyId} AND idempotency_key = ${key}`
            ),
            sql.withTransaction,
            Effect.orDie
          ),
        findById: (id) =>
          Effect.orDie(Effect.map(sql`SELECT ${columns} FROM pets WHERE id = ${id}`, (rows) =>
            Option.fromNullable(fromPgRows(rows)[0]))),
        list: ({ afterId = 0, limit, status }) =>
          Effect.orDie(Effect.map(
            status === undefined
              ? sql`SELECT ${columns} FROM pets WHERE id > ${afterId} ORDER BY id LIMIT ${limit + 1}`
              : sql`SELECT ${columns} FROM pets WHERE status = ${status} AND id > ${afterId} ORDER BY id LIMIT ${limit + 1}`,
            (rows) => {
              const pets = fromPgRows(rows)
              return { pets: pets.slice(0, limit), hasMore: pets.length > limit }
            }
          )),
        isReady: sql`SELECT 1`.pipe(Effect.as(true), Effect.catchAllCause(() => Effect.succeed(false)))
      })
    })
  )
}

const statuses: ReadonlySet<unknown> = new Set(PetStatus.literals)

/**
 * Rows of `pets` (snake_case columns, NULL for an absent status) checked against the table's shape
 * and mapped by hand: decoding through a Schema costs more than the query on a page of 100.
 */
const toPets = (rows: ReadonlyArray<any>): Array<Pet> =>
  rows.map(({ category_id, id, name, status }) => {
    if (
      !Number.isSafeInteger(id) || typeof name !== "string" || !Number.isSafeInteger(category_id) ||
      (status !== null && !statuses.has(status))
    ) {
      throw new Error(`pets row ${id} does not have the table's shape`)
    }
    return status === null ? { id, name, categoryId: category_id } : { id, name, categoryId: category_id, status }
  })

/** PostgreSQL returns BIGINT columns as decimal strings. */
const fromPgRows = (rows: ReadonlyArray<any>): Array<Pet> =>
  toPets(rows.map((row) => ({ ...row, id: Number(row.id), category_id: Number(row.category_id) })))
