import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { statSync } from "node:fs"
import { DatabaseUnavailable } from "../src/Domain/DatabaseUnavailable.js"
import type { NewPet } from "../src/Domain/Pet.js"
import { PetRepository } from "../src/Pets/PetRepository.js"
import { petColumnNames } from "../src/Sql/PetColumns.js"
import { everyField } from "./support/Pets.js"
import { TemporaryPostgres } from "./support/PostgresStores.js"
import { TemporarySqlite } from "./support/SqliteStores.js"

const stores: ReadonlyArray<readonly [string, Layer.Layer<PetRepository, unknown>]> = [
  ["in memory", PetRepository.InMemory],
  ["SQLite", PetRepository.Sql.pipe(Layer.provide(TemporarySqlite))],
  ["PostgreSQL", PetRepository.Sql.pipe(Layer.provide(TemporaryPostgres))]
]

const rex: NewPet = { name: "Rex", categoryId: 3, status: "available" }

for (const [name, store] of stores) {
  describe(`PetRepository contract, ${name}`, () => {
    it.effect("create assigns ascending ids from 1 and keeps every field; findById and list read them all back", () =>
      Effect.gen(function*() {
        const pets = yield* PetRepository
        const first = yield* pets.create(everyField)
        const second = yield* pets.create({ name: "Tom", categoryId: -1 })
        expect(first).toStrictEqual({ id: 1, ...everyField })
        expect(second).toStrictEqual({ id: 2, name: "Tom", categoryId: -1 })
        expect(yield* pets.findById(1)).toStrictEqual(Option.some(first))
        expect((yield* pets.list({ limit: 10 })).pets).toStrictEqual([first, second])
      }).pipe(Effect.provide(store)))

    it.effect("findById returns the stored pet byte for byte, or None", () =>
      Effect.gen(function*() {
        const pets = yield* PetRepository
        const unusual = { name: "Ünïcödé 🐕 '); DROP TABLE pets; --", categoryId: Number.MAX_SAFE_INTEGER }
        const created = yield* pets.create(unusual)
        expect(yield* pets.findById(created.id)).toStrictEqual(Option.some({ id: created.id, ...unusual }))
        expect(yield* pets.findById(999)).toStrictEqual(Option.none())
      }).pipe(Effect.provide(store)))

    it.effect("list pages in id order after a position, filtered by status, telling whether more follow", () =>
      Effect.gen(function*() {
        const pets = yield* PetRepository
        for (let i = 1; i <= 7; i++) {
          yield* pets.create({ name: `p${i}`, categoryId: i, ...(i % 2 === 0 ? { status: "sold" as const } : {}) })
        }
        const all = yield* pets.list({ limit: 3 })
        expect(all.pets.map((pet) => pet.id)).toEqual([1, 2, 3])
        expect(all.hasMore).toBe(true)
        const rest = yield* pets.list({ limit: 10, afterId: 3 })
        expect(rest.pets.map((pet) => pet.id)).toEqual([4, 5, 6, 7])
        expect(rest.hasMore).toBe(false)
        const sold = yield* pets.list({ limit: 2, status: "sold" })
        expect(sold.pets.map((pet) => pet.id)).toEqual([2, 4])
        expect(sold.hasMore).toBe(true)
        const lastSold = yield* pets.list({ limit: 2, status: "sold", afterId: 4 })
        expect(lastSold).toStrictEqual({ pets: [{ id: 6, name: "p6", categoryId: 6, status: "sold" }], hasMore: false })
        const exact = yield* pets.list({ limit: 7 })
        expect(exact.hasMore).toBe(false)
      }).pipe(Effect.provide(store)))

    it.effect("readiness answers ready while the store works", () =>
      Effect.gen(function*() {
        expect(yield* (yield* PetRepository).readiness).toBe("ready")
      }).pipe(Effect.provide(store)))
  })
}

describe("SQLite database", () => {
  it.effect("runs WAL with synchronous=NORMAL, no busy timeout inside the driver (the wait for a lock is in Effect), and an index serving the status filter in id order", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      expect(yield* sql`PRAGMA journal_mode`).toEqual([{ journal_mode: "wal" }])
      expect(yield* sql`PRAGMA synchronous`).toEqual([{ synchronous: 1 }])
      expect(yield* sql`PRAGMA busy_timeout`).toEqual([{ timeout: 0 }])
      expect(yield* sql`PRAGMA foreign_keys`).toEqual([{ foreign_keys: 1 }])
      const plan = yield* sql<{ detail: string }>`EXPLAIN QUERY PLAN
        SELECT ${
        sql.literal(petColumnNames.join(", "))
      } FROM pets WHERE status = 'sold' AND id > 10 ORDER BY id LIMIT 21`
      const details = plan.map((row) => row.detail).join("\n")
      expect(details).toMatch(/USING INDEX pets_status_id/)
      expect(details).not.toContain("TEMP B-TREE")
    }).pipe(Effect.provide(TemporarySqlite)))

  // Live clock: the store's sweep sleeps meanwhile, and a test clock left alone that long warns.
  it.live("the WAL is checkpointed as pets are created: it stays near SQLite's 1,000-page mark", () =>
    Effect.gen(function*() {
      const pets = yield* PetRepository
      const sql = yield* SqlClient.SqlClient
      const [{ file }] = yield* sql<{ file: string }>`SELECT file FROM pragma_database_list WHERE name = 'main'`
      // Each create commits at least one 4 KiB page: without checkpoints, 4,000 creates exceed 16 MB.
      for (let i = 0; i < 4000; i++) yield* pets.create(rex)
      expect(statSync(`${file}-wal`).size).toBeLessThan(8 * 1024 * 1024)
    }).pipe(Effect.provide(PetRepository.Sql.pipe(Layer.provideMerge(TemporarySqlite)))))

  // Live clock: the store waits for the lock on Effect's clock, up to the statement timeout.
  it.live(
    "a write lock another connection holds past the wait: DatabaseUnavailable (busy), not a defect",
    () =>
      Effect.gen(function*() {
        const pets = yield* PetRepository
        const sql = yield* SqlClient.SqlClient
        const [{ file }] = yield* sql<{ file: string }>`SELECT file FROM pragma_database_list WHERE name = 'main'`
        const other = yield* Effect.acquireRelease(
          Effect.sync(() => new Database(file)),
          (db) => Effect.sync(() => db.close())
        )
        other.run("BEGIN IMMEDIATE")
        const refused = yield* Effect.flip(pets.create(rex))
        expect(refused).toBeInstanceOf(DatabaseUnavailable)
        expect(refused.reason).toBe("busy")
        other.run("ROLLBACK")
        expect((yield* pets.create(rex)).id).toBe(1)
      }).pipe(Effect.provide(PetRepository.Sql.pipe(Layer.provideMerge(TemporarySqlite)))),
    20_000
  )

  it.effect("ids are never reused, even after the highest row is deleted", () =>
    Effect.gen(function*() {
      const pets = yield* PetRepository
      const sql = yield* SqlClient.SqlClient
      yield* pets.create(rex)
      const second = yield* pets.create(rex)
      yield* sql`DELETE FROM pets WHERE id = ${second.id}`
      expect((yield* pets.create(rex)).id).toBe(3)
    }).pipe(Effect.provide(PetRepository.Sql.pipe(Layer.provideMerge(TemporarySqlite)))))
})
