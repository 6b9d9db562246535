import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Latch, Layer, References, Tracer } from "effect"
import { SqlClient } from "effect/sql"
import { isSqliteClient, type SqliteClient } from "../src/Sql/SqliteClient.js"
import { TemporarySqlite } from "./support/SqliteStores.js"

const names = (rows: ReadonlyArray<Record<string, unknown>>) => rows.map((row) => row.name)

const sqliteClient: Effect.Effect<SqliteClient, never, SqlClient.SqlClient> = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => isSqliteClient(sql) ? Effect.succeed(sql) : Effect.die("not the SQLite client")
)

/** The span names a test's tracer was asked for. */
const recordingTracer = () => {
  const names: Array<string> = []
  const tracer = Tracer.make({
    span(options) {
      names.push(options.name)
      return new Tracer.NativeSpan(options)
    }
  })
  return { names, layer: Layer.succeed(Tracer.Tracer, tracer) }
}

describe("SqliteClient.executeDirect: a statement run on the connection itself", () => {
  it.effect("answers what the library's statement answers, through the transform, and fails as it does", () =>
    Effect.gen(function*() {
      const sql = yield* sqliteClient
      yield* sql`INSERT INTO pets (name, category_id) VALUES (${"Rex"}, ${1}), (${"Tom"}, ${2})`
      const text = "SELECT name FROM pets WHERE category_id >= ? ORDER BY id"
      expect(yield* sql.executeDirect(text, [1], names)).toEqual(names(yield* sql.unsafe<Record<string, unknown>>(text, [1])))
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

  it.effect("with tracing on (a sampled request) is the library's statement, with its span; with tracing off, no span", () =>
    Effect.gen(function*() {
      const sql = yield* sqliteClient
      const { layer, names: spans } = recordingTracer()
      const run = sql.executeDirect("SELECT name FROM pets", [], names).pipe(Effect.provide(layer))
      yield* run.pipe(Effect.provideService(References.TracerEnabled, false))
      expect(spans).toEqual([])
      yield* run.pipe(Effect.provideService(References.TracerEnabled, true))
      expect(spans).toHaveLength(1)
      expect(spans[0]).toMatch(/sqlite/i)
    }).pipe(Effect.provide(TemporarySqlite)))
})
