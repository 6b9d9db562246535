import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { Effect, Fiber, Latch } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { isSqliteClient, make as makeSqliteClient, type SqliteClient } from "../src/Sql/SqliteClient.js"
import { TemporarySqlite } from "./support/SqliteStores.js"

const names = (rows: ReadonlyArray<Record<string, unknown>>) => rows.map((row) => row.name)

const sqliteClient: Effect.Effect<SqliteClient, never, SqlClient.SqlClient> = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => isSqliteClient(sql) ? Effect.succeed(sql) : Effect.die("not the SQLite client")
)

describe("SqliteClient.executeDirect: a statement run on the connection itself", () => {
  it.effect("answers what the library's statement answers, through the transform, and fails as it does", () =>
    Effect.gen(function*() {
      const sql = yield* sqliteClient
      yield* sql`INSERT INTO pets (name, category_id) VALUES (${"Rex"}, ${1}), (${"Tom"}, ${2})`
      const text = "SELECT name FROM pets WHERE category_id >= ? ORDER BY id"
      expect(yield* sql.executeDirect(text, [1], names)).toEqual(
        names(yield* sql.unsafe<Record<string, unknown>>(text, [1]))
      )
      expect(yield* sql.executeDirect(text, [2], names)).toEqual(["Tom"])
      const failed = yield* Effect.flip(sql.executeDirect("SELECT missing_column FROM pets", [], names))
      expect(failed._tag).toBe("SqlError")
      expect(failed.message).toMatch(/missing_column/)
    }).pipe(Effect.provide(TemporarySqlite)))

  it.effect("inside a transaction runs on the transaction's connection and sees its writes", () =>
    Effect.gen(function*() {
      const sql = yield* sqliteClient
      const inside = yield* Effect.gen(function*() {
        yield* sql`INSERT INTO pets (name, category_id) VALUES (${"Rex"}, ${1})`
        return yield* sql.executeDirect("SELECT name FROM pets", [], names)
      }).pipe(sql.withTransaction)
      expect(inside).toEqual(["Rex"])
    }).pipe(Effect.provide(TemporarySqlite)))

  it.effect("outside a transaction that has begun waits for its end, and never reads what it has not committed", () =>
    Effect.gen(function*() {
      const sql = yield* sqliteClient
      const written = yield* Latch.make(false)
      const commit = yield* Latch.make(false)
      const transaction = yield* Effect.gen(function*() {
        yield* sql`INSERT INTO pets (name, category_id) VALUES (${"Rex"}, ${1})`
        yield* written.open
        yield* commit.await
      }).pipe(sql.withTransaction, Effect.forkChild)
      yield* written.await
      const reader = yield* Effect.forkChild(sql.executeDirect("SELECT name FROM pets", [], names))
      yield* Effect.yieldNow
      expect(reader.pollUnsafe()).toBeUndefined()
      yield* commit.open
      yield* Fiber.join(transaction)
      expect(yield* Fiber.join(reader)).toEqual(["Rex"])
    }).pipe(Effect.provide(TemporarySqlite)))

  it.effect("every run is given to onRun as it starts, on the fiber running it, and ended with its outcome: the library's statements and direct ones alike", () =>
    Effect.gen(function*() {
      const self = yield* Effect.withFiber((fiber) => Effect.succeed(fiber))
      const runs: Array<{ readonly sql: string; readonly onFiber: boolean; ended?: string }> = []
      const sql = yield* makeSqliteClient({
        filename: ":memory:",
        disableWAL: true,
        onRun: (text) => {
          const run: (typeof runs)[number] = { sql: text, onFiber: Fiber.getCurrent() === self }
          runs.push(run)
          return (exit) => {
            run.ended = exit._tag
          }
        }
      })
      yield* sql.unsafe("CREATE TABLE pets (id INTEGER PRIMARY KEY, name TEXT)")
      yield* sql.executeDirect("SELECT name FROM pets WHERE id > ?", [0], names)
      yield* Effect.flip(sql.executeDirect("SELECT nothing FROM pets", [], names))
      expect(runs).toEqual([
        { sql: "CREATE TABLE pets (id INTEGER PRIMARY KEY, name TEXT)", onFiber: true, ended: "Success" },
        { sql: "SELECT name FROM pets WHERE id > ?", onFiber: true, ended: "Success" },
        { sql: "SELECT nothing FROM pets", onFiber: true, ended: "Failure" }
      ])
    }).pipe(Effect.provide(Reactivity.layer)))

  it.effect("a statement that waits for another connection's lock is one run, ended once with its outcome", () =>
    Effect.gen(function*() {
      const folder = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "petstore-test-"))),
        (folder) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
      )
      const filename = join(folder, "pets.db")
      const runs: Array<{ readonly sql: string; ended?: string }> = []
      const sql = yield* makeSqliteClient({
        filename,
        disableWAL: true,
        lockWait: "1 second",
        onRun: (text) => {
          const run: (typeof runs)[number] = { sql: text }
          runs.push(run)
          return (exit) => {
            run.ended = exit._tag
          }
        }
      })
      yield* sql.unsafe("CREATE TABLE pets (id INTEGER PRIMARY KEY, name TEXT)")
      const other = new Database(filename)
      other.run("BEGIN IMMEDIATE")
      const insert = "INSERT INTO pets (name) VALUES (?)"
      const writer = yield* Effect.forkChild(sql.executeDirect(insert, ["Rex"], names))
      // Several tries, each refused while the other connection holds the lock.
      yield* TestClock.adjust("20 millis")
      expect(runs.filter((run) => run.sql === insert)).toEqual([{ sql: insert }])
      other.run("COMMIT")
      other.close()
      yield* TestClock.adjust("100 millis")
      yield* Fiber.join(writer)
      expect(runs.filter((run) => run.sql === insert)).toEqual([{ sql: insert, ended: "Success" }])
    }).pipe(Effect.provide(Reactivity.layer)))
})
