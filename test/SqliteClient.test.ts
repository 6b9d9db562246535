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

/** The spans a test's tracer made. */
const recordingTracer = () => {
  const spans: Array<Tracer.NativeSpan> = []
  const tracer = Tracer.make({
    span(options) {
      const span = new Tracer.NativeSpan(options)
      spans.push(span)
      return span
    }
  })
  return { spans, layer: Layer.succeed(Tracer.Tracer, tracer) }
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

  it.effect("with tracing on (a sampled request) has the span the library's statement has; with tracing off, none", () =>
    Effect.gen(function*() {
      const sql = yield* sqliteClient
      const text = "SELECT name FROM pets WHERE id > ?"
      const { layer, spans } = recordingTracer()
      const traced = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        effect.pipe(Effect.provide(layer), Effect.provideService(References.TracerEnabled, true))
      yield* sql.executeDirect(text, [0], names).pipe(Effect.provide(layer), Effect.provideService(References.TracerEnabled, false))
      expect(spans).toEqual([])
      yield* traced(sql.unsafe(text, [0]))
      yield* traced(sql.executeDirect(text, [0], names))
      expect(spans).toHaveLength(2)
      const [library, direct] = spans
      expect(direct!.name).toBe(library!.name)
      expect(direct!.name).toMatch(/sqlite/)
      expect(direct!.kind).toBe(library!.kind)
      expect(Object.fromEntries(direct!.attributes)).toEqual(Object.fromEntries(library!.attributes))
      expect(direct!.attributes.get("db.query.text")).toBe(text)
      expect(direct!.status._tag).toBe("Ended")
    }).pipe(Effect.provide(TemporarySqlite)))
})
