import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { spawnSync } from "node:child_process"
import { copyFileSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { ApiKeys, hashKey } from "../src/Auth/ApiKeys.js"
import { AppConfig } from "../src/Config/AppConfig.js"
import { Cursors } from "../src/Pets/Cursors.js"
import { PetRepository } from "../src/Pets/PetRepository.js"
import { DatabaseLive } from "../src/Service/Stores.js"
import { migrations } from "../src/Sql/Migrations.js"
import { temporaryDatabase } from "./support/PostgresStores.js"
import { temporaryFolder } from "./support/ServerProcess.js"

/**
 * Stores made by commit 8069bce, the last with a migration set per engine (a key, a revoked key,
 * three pets, a completed idempotency record and a cursor, through that commit's own code; the
 * PostgreSQL one as `pg_dump` wrote it): they open and keep working.
 */
const fixture = (name: string) => new URL(`./fixtures/${name}`, import.meta.url).pathname

interface Made {
  readonly key: string
  readonly revokedKey: string
  readonly pets: ReadonlyArray<{ readonly id: number; readonly name: string; readonly categoryId: number }>
  readonly cursorAfterFirst: string
  readonly idempotency: {
    readonly apiKeyId: number
    readonly key: string
    readonly fingerprint: string
    readonly pet: unknown
  }
}

const keepsWorking = (made: Made) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Every migration of this build, recorded once each.
    const applied = yield* sql<{ migration_id: number; name: string }>`
      SELECT migration_id, name FROM effect_sql_migrations ORDER BY migration_id`
    expect(applied.map(({ migration_id, name }) => `${migration_id} ${name}`))
      .toEqual((yield* migrations).map(([id, name]) => `${id} ${name}`))
    const keys = yield* ApiKeys
    expect(yield* keys.findActiveByHash(hashKey(made.key))).toStrictEqual(
      Option.some({ keyId: 1, name: "made by 8069bce" })
    )
    expect(yield* keys.findActiveByHash(hashKey(made.revokedKey))).toStrictEqual(Option.none())
    const pets = yield* PetRepository
    expect((yield* pets.list({ limit: 10 })).pets).toStrictEqual(made.pets)
    const cursors = yield* Cursors
    expect(yield* cursors.decode(made.cursorAfterFirst, undefined)).toBe(made.pets[0]!.id)
    const { apiKeyId, fingerprint, key, pet } = made.idempotency
    expect(yield* pets.reserve({ apiKeyId, key }, 5000)).toStrictEqual({ _tag: "Completed", fingerprint, pet })
    expect((yield* pets.create({ name: "After", categoryId: 1 })).id).toBe(made.pets.length + 1)
    const created = yield* keys.create("after the upgrade")
    expect(created.record.id).toBe(3)
    expect((yield* keys.list).map((record) => Option.isSome(record.revokedAt))).toEqual([false, true, false])
  })

const stores = Layer.mergeAll(PetRepository.Sql, ApiKeys.Sql, Cursors.Sql)

describe("a store made by 8069bce opens and keeps working", () => {
  it.effect("SQLite", () =>
    Effect.gen(function*() {
      const folder = yield* Effect.acquireRelease(Effect.sync(temporaryFolder), (folder) =>
        Effect.sync(() => folder[Symbol.dispose]()))
      const databaseUrl = join(folder.path, "petstore.db")
      copyFileSync(fixture("store-8069bce.db"), databaseUrl)
      const made: Made = JSON.parse(readFileSync(fixture("store-8069bce-sqlite.json"), "utf8"))
      yield* keepsWorking(made).pipe(
        Effect.provide(stores.pipe(Layer.provideMerge(DatabaseLive), Layer.provide(AppConfig.make({ databaseUrl }))))
      )
    }).pipe(Effect.scoped))

  it.effect("PostgreSQL", () =>
    Effect.gen(function*() {
      const databaseUrl = yield* temporaryDatabase
      const restore = spawnSync("psql", [
        databaseUrl,
        "-v",
        "ON_ERROR_STOP=1",
        "-q",
        "-f",
        fixture("store-8069bce-postgres.sql")
      ], {
        encoding: "utf8"
      })
      expect(restore.status, restore.stderr).toBe(0)
      const made: Made = JSON.parse(readFileSync(fixture("store-8069bce-postgres.json"), "utf8"))
      yield* keepsWorking(made).pipe(
        Effect.provide(stores.pipe(Layer.provideMerge(DatabaseLive), Layer.provide(AppConfig.make({ databaseUrl }))))
      )
    }).pipe(Effect.scoped))
})
