import { PgClient } from "@effect/sql-pg"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { PetRepository } from "../src/Pets/PetRepository.js"
import { migrations, runMigrations } from "../src/Sql/Migrations.js"
import * as SqliteClient from "../src/Sql/SqliteClient.js"
import { temporaryDatabase, TemporaryPostgres } from "./support/PostgresStores.js"
import { TemporarySqlite } from "./support/SqliteStores.js"
import { createKey, makeTestServer, send } from "./support/TestServer.js"

/** A bare connection to a new database of each engine, foreign keys on, nothing migrated. */
const bareSqlite = Layer.unwrap(
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "petstore-test-"))),
      (folder) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
    ),
    (folder) => SqliteClient.layer({ filename: join(folder, "pets.db") })
  )
)
const barePostgres = Layer.unwrap(
  Effect.map(temporaryDatabase, (url) => PgClient.layer({ url: Redacted.make(url), maxConnections: 1 }))
)

/** The schema as the build before the rule was added made it. */
const migrateUpTo = (last: number) =>
  Migrator.make({})({ loader: Effect.map(migrations, (all) => all.filter(([id]) => id <= last)) })

/** The service on the SQL store, and the store's `SqlClient` beside it (one connection: a layer is built once). */
const serverOn = (database: Layer.Layer<SqlClient.SqlClient>) =>
  Layer.provideMerge(makeTestServer(PetRepository.Sql.pipe(Layer.provide(database))), database)

const engines = [
  ["SQLite", TemporarySqlite, bareSqlite],
  ["PostgreSQL", TemporaryPostgres, barePostgres]
] as const

for (const [name, database, bare] of engines) {
  describe(`a pet deleted by SQL, ${name}`, () => {
    it.effect("one created with an Idempotency-Key goes with its record, no foreign-key error; a retry creates it again", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { key } = yield* createKey()
        const headers = { "idempotency-key": "deleted-later" }
        const body = JSON.stringify({ name: "Rex", categoryId: 3 })
        const created = yield* send("POST", "/v1/pets", { key, headers, body })
        expect(created.status).toBe(201)
        yield* sql`DELETE FROM pets WHERE id = ${created.body.id}`
        expect(yield* sql`SELECT idempotency_key FROM idempotency_keys`).toEqual([])
        const again = yield* send("POST", "/v1/pets", { key, headers, body })
        expect(again.status).toBe(201)
        expect(again.body.id).not.toBe(created.body.id)
      }).pipe(Effect.provide(serverOn(Layer.orDie(database)))))

    it.live("the migration keeps every record of a database made before it, and an index finds them by pet", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        if (name === "SQLite") yield* sql`PRAGMA foreign_keys = ON`
        yield* migrateUpTo(6)
        yield* sql`INSERT INTO pets (name, category_id) VALUES ('Rex', 3), ('Tom', 1)`
        yield* sql`INSERT INTO idempotency_keys (api_key_id, idempotency_key, fingerprint, pet_id, created_at)
          VALUES (1, 'rex', 'fp-rex', 1, 10), (1, 'tom', 'fp-tom', 2, 11), (2, 'running', NULL, NULL, 12)`
        const records = sql`SELECT api_key_id, idempotency_key, fingerprint, pet_id, created_at
          FROM idempotency_keys ORDER BY idempotency_key`
        const before = yield* records
        yield* runMigrations
        expect(yield* records).toEqual(before)
        yield* sql`DELETE FROM pets WHERE id = 1`
        expect((yield* records).map((row) => row.idempotency_key)).toEqual(["running", "tom"])
        const indexes = yield* sql.onDialectOrElse({
          pg: () => sql`SELECT indexname AS name FROM pg_indexes WHERE tablename = 'idempotency_keys'`,
          orElse: () => sql`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'idempotency_keys'`
        })
        expect(indexes.map((row) => row.name)).toContain("idempotency_keys_pet_id")
        expect(indexes.map((row) => row.name)).toContain("idempotency_keys_created_at")
      }).pipe(Effect.provide(bare)))
  })
}
