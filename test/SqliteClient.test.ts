import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { Effect, Fiber, Latch } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { directStatementsOf } from "../src/Sql/DirectStatements.js"
import { make as makeSqliteClient } from "../src/Sql/SqliteClient.js"
import { TemporarySqlite } from "./support/SqliteStores.js"

const names = (rows: ReadonlyArray<Record<string, unknown>>) => rows.map((row) => row.name)

/** The SQLite client, and its statements as the stores run them: directly when it carries `runDirect`. */
const sqliteClient = Effect.map(SqlClient.SqlClient, (sql) => ({ sql, executeDirect: directStatementsOf(sql) }))

describe("SqliteClient's direct statements: a statement run on the connection itself", () => {
  it.effect("are carried by the client, so that the stores take them", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      expect("runDirect" in sql).toBe(true)
    }).pipe(Effect.provide(TemporarySqlite)))

  it.effect("answers what the library's statement answers, through the transform, and fails as it does", () =>
    Effect.gen(function*() {
      const { executeDirect, sql } = yield* sqliteClient
      yield* sql`INSERT INTO pets (name, category_id) VALUES (${"Rex"}, ${1}), (${"Tom"}, ${2})`
      const text = "SELECT name FROM pets WHERE category_id >= ? ORDER BY id"
      expect(yield* executeDirect(text, [1], names)).toEqual(
        names(yield* sql.unsafe<Record<string, unknown>>(text, [1]))
      )
      expect(yield* executeDirect(text, [2], names)).toEqual(["Tom"])
      const failed = yield* Effect.flip(executeDirect("SELECT missing_column FROM pets", [], names))
      expect(failed._tag).toBe("SqlError")
      expect(failed.message).toMatch(/missing_column/)
    }).pipe(Effect.provide(TemporarySqlite)))

  it.effect("inside a transaction runs on the transaction's connection and sees its writes", () =>
    Effect.gen(function*() {
      const { executeDirect, sql } = yield* sqliteClient
      const inside = yield* Effect.gen(function*() {
        yield* sql`INSERT INTO pets (name, category_id) VALUES (${"Rex"}, ${1})`
        return yield* executeDirect("SELECT name FROM pets", [], names)
      }).pipe(sql.withTransaction)
      expect(inside).toEqual(["Rex"])
    }).pipe(Effect.provide(TemporarySqlite)))

  it.effect("outside a transaction that has begun waits for its end, and never reads what it has not committed", () =>
    Effect.gen(function*() {
      const { executeDirect, sql } = yield* sqliteClient
      const written = yield* Latch.make(false)
      const commit = yield* Latch.make(false)
      const transaction = yield* Effect.gen(function*() {
        yield* sql`INSERT INTO pets (name, category_id) VALUES (${"Rex"}, ${1})`
        yield* written.open
        yield* commit.await
      }).pipe(sql.withTransaction, Effect.forkChild)
      yield* written.await
      const reader = yield* Effect.forkChild(executeDirect("SELECT name FROM pets", [], names))
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
      const executeDirect = directStatementsOf(sql)
      yield* executeDirect("SELECT name FROM pets WHERE id > ?", [0], names)
      yield* Effect.flip(executeDirect("SELECT nothing FROM pets", [], names))
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
      const executeDirect = directStatementsOf(sql)
      const other = new Database(filename)
      other.run("BEGIN IMMEDIATE")
      const insert = "INSERT INTO pets (name) VALUES (?)"
      const writer = yield* Effect.forkChild(executeDirect(insert, ["Rex"], names))
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
