import { Clock, Effect, Option, Schedule } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import type { NewPet, Pet } from "../Domain/Pet.js"
import { toUnavailable, unavailableOrDie } from "../Sql/DatabaseErrors.js"
import { directStatementsOf } from "../Sql/DirectStatements.js"
import { newPetColumnNames, newPetValues, petColumnNames, petFromRow } from "../Sql/PetColumns.js"
import { ClaimTakenOver, idempotencyRetentionMillis, type IdempotencyScope, type Reservation } from "./Idempotency.js"
import type { PetRepository, Readiness } from "./PetRepository.js"

/** Expired idempotency records deleted every minute, in the background; a failed sweep is tried again the next turn. */
export const purgeExpiredKeys = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.flatMap(
    Clock.currentTimeMillis,
    (now) => sql`DELETE FROM idempotency_keys WHERE created_at < ${now - idempotencyRetentionMillis}`
  ).pipe(Effect.ignoreCause({ log: "Debug" }), Effect.repeat(Schedule.spaced("1 minute")), Effect.forkScoped))

/** Both engines alike; a reservation is one statement (insert or take over): two racing for a key cannot both win. */
export const makeSqlPetRepository = Effect.map(SqlClient.SqlClient, (sql) => {
  // The replay answers the pet as the create did: the same columns, from the joined row.
  const replayColumns = sql.literal(petColumnNames.map((name) => `p.${name}`).join(", "))
  // The statements most requests make, written once with the dialect's placeholders, not compiled at every call.
  const placeholder = (n: number) => sql.onDialectOrElse({ pg: () => `$${n}`, orElse: () => "?" })
  const selectPets = `SELECT ${petColumnNames.join(", ")} FROM pets`
  const byId = `${selectPets} WHERE id = ${placeholder(1)}`
  const pageFrom = (n: number) => `id > ${placeholder(n)} ORDER BY id LIMIT ${placeholder(n + 1)}`
  const page = `${selectPets} WHERE ${pageFrom(1)}`
  const pageByStatus = `${selectPets} WHERE status = ${placeholder(1)} AND ${pageFrom(2)}`
  const insert = `INSERT INTO pets (${newPetColumnNames.join(", ")}) ` +
    `VALUES (${newPetColumnNames.map((_, i) => placeholder(i + 1)).join(", ")}) RETURNING ${petColumnNames.join(", ")}`
  const execute = directStatementsOf(sql)
  const insertPet = (pet: NewPet) => execute(insert, newPetValues(pet), (rows) => petFromRow(rows[0]!))
  const findRecord = ({ apiKeyId, key }: IdempotencyScope) =>
    sql<{ fingerprint: string | null; pet_id: unknown }>`
      SELECT r.fingerprint, r.pet_id, ${replayColumns}
      FROM idempotency_keys r LEFT JOIN pets p ON p.id = r.pet_id
      WHERE r.api_key_id = ${apiKeyId} AND r.idempotency_key = ${key}`
  const reserve = (
    scope: IdempotencyScope,
    now: number,
    abandonedAfterMillis: number
  ): Effect.Effect<Reservation, SqlError.SqlError> =>
    Effect.gen(function*() {
      const claimed = yield* sql`
        INSERT INTO idempotency_keys AS r (api_key_id, idempotency_key, created_at)
        VALUES (${scope.apiKeyId}, ${scope.key}, ${now})
        ON CONFLICT (api_key_id, idempotency_key) DO UPDATE
          SET created_at = excluded.created_at, fingerprint = NULL, pet_id = NULL
          WHERE r.created_at < ${now - idempotencyRetentionMillis}
            OR (r.pet_id IS NULL AND r.created_at < ${now - abandonedAfterMillis})
        RETURNING 1 AS claimed`
      if (claimed.length > 0) return { _tag: "Reserved", claimedAt: now }
      const [record] = yield* findRecord(scope)
      // Released between the two statements: claim it again.
      if (record === undefined) return yield* reserve(scope, now, abandonedAfterMillis)
      return record.pet_id === null
        ? { _tag: "InProgress" }
        : { _tag: "Completed", fingerprint: record.fingerprint!, pet: petFromRow(record) }
    })
  const pageOf = (limit: number) => (rows: ReadonlyArray<Record<string, unknown>>) => {
    const pets: Array<Pet> = []
    for (let i = 0; i < rows.length && i < limit; i++) pets.push(petFromRow(rows[i]))
    return { pets, hasMore: rows.length > limit }
  }
  return {
    create: (pet) => unavailableOrDie(insertPet(pet)),
    reserve: (scope, abandonedAfterMillis) =>
      unavailableOrDie(Effect.flatMap(Clock.currentTimeMillis, (now) => reserve(scope, now, abandonedAfterMillis))),
    release: ({ apiKeyId, key }, claimedAt) =>
      unavailableOrDie(Effect.asVoid(sql`DELETE FROM idempotency_keys
        WHERE api_key_id = ${apiKeyId} AND idempotency_key = ${key} AND created_at = ${claimedAt} AND pet_id IS NULL`)),
    createOnce: ({ apiKeyId, key }, claimedAt, fingerprint, newPet) =>
      insertPet(newPet).pipe(
        Effect.tap((pet) =>
          Effect.flatMap(
            sql`UPDATE idempotency_keys SET fingerprint = ${fingerprint}, pet_id = ${pet.id}
                WHERE api_key_id = ${apiKeyId} AND idempotency_key = ${key}
                  AND created_at = ${claimedAt} AND pet_id IS NULL
                RETURNING 1 AS completed`,
            (rows) => rows.length === 1 ? Effect.void : Effect.fail(new ClaimTakenOver())
          )
        ),
        sql.withTransaction,
        Effect.catchTag("SqlError", (error) => unavailableOrDie(Effect.fail(error)))
      ),
    findById: (id) =>
      unavailableOrDie(execute(byId, [id], (rows) => Option.map(Option.fromUndefinedOr(rows[0]), petFromRow))),
    list: ({ afterId = 0, limit, status }) =>
      unavailableOrDie(
        // One row more than the page tells whether another page follows.
        status === undefined
          ? execute(page, [afterId, limit + 1], pageOf(limit))
          : execute(pageByStatus, [status, afterId, limit + 1], pageOf(limit))
      ),
    // The pets table itself, not just the connection: a locked table does not answer. On PostgreSQL,
    // whether writes are refused, without writing; a SQLite file's failure is this instance's, unless busy.
    readiness: sql.onDialectOrElse({
      pg: () =>
        Effect.map(
          sql`SELECT current_setting('transaction_read_only') AS read_only, EXISTS (SELECT 1 FROM pets) AS probed`,
          ([row]): Readiness => row?.["read_only"] === "on" ? "read_only" : "ready"
        ),
      orElse: (): Effect.Effect<Readiness, SqlError.SqlError> =>
        Effect.catch(
          Effect.as(sql`SELECT id FROM pets LIMIT 1`, "ready" as const),
          (error) => Effect.succeed(toUnavailable(error)?.reason === "busy" ? "unavailable" : "unusable")
        )
    }).pipe(Effect.catchCause(() => Effect.succeed<Readiness>("unavailable")))
  } satisfies PetRepository["Service"]
})
