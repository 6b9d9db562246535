import { describe, expect, it } from "@effect/vitest"
import { Cause, Context, Effect, Layer, Logger, Redacted, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import { isSqlError } from "effect/sql/SqlError"
import { ApiKeys, hashKey } from "../src/Auth/ApiKeys.js"
import { AppConfig } from "../src/Config/AppConfig.js"
import { databaseWords, toUnavailable } from "../src/Sql/DatabaseErrors.js"
import { directStatementsOf } from "../src/Sql/DirectStatements.js"
import { migrations } from "../src/Sql/Migrations.js"
import { petColumnNames } from "../src/Sql/PetColumns.js"
import { PostgresConnection } from "../src/Sql/PostgresConnection.js"
import { temporaryDatabase, TemporaryPostgres } from "./support/PostgresStores.js"

describe("the PostgreSQL database", () => {
  it.live("instances starting together migrate it once", () =>
    Effect.gen(function*() {
      const databaseUrl = yield* temporaryDatabase
      const instance = PostgresConnection.pipe(Layer.provide(AppConfig.make({ databaseUrl })))
      const [built] = yield* Effect.all(Array.from({ length: 4 }, () => Layer.build(Layer.fresh(instance))), {
        concurrency: 4
      })
      const sql = Context.get(built!, SqlClient.SqlClient)
      const applied = yield* sql<{ migration_id: number }>`SELECT migration_id FROM effect_sql_migrations ORDER BY 1`
      expect(applied.map((row) => row.migration_id)).toEqual((yield* migrations).map(([id]) => id))
    }).pipe(Effect.scoped))

  it.live("an instance that finds the migrations' lock free does not say it waits for another", () =>
    Effect.gen(function*() {
      const databaseUrl = yield* temporaryDatabase
      const messages: Array<unknown> = []
      yield* Layer.build(PostgresConnection.pipe(Layer.provide(AppConfig.make({ databaseUrl })))).pipe(
        Effect.provide(Logger.layer([Logger.make(({ message }) => messages.push(message))]))
      )
      expect(messages.flat().filter((message) => String(message).includes("waiting for another instance"))).toEqual([])
    }).pipe(Effect.scoped))

  it.live("every connection carries the statement and idle-in-transaction timeouts, and a transaction left idle past its timeout is ended by the server", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const [settings] = yield* sql<{ statement_timeout: string; idle: string }>`
        SELECT current_setting('statement_timeout') AS statement_timeout,
               current_setting('idle_in_transaction_session_timeout') AS idle`
      expect(settings).toEqual({ statement_timeout: "3s", idle: "10s" })
      // The server's side of it, shortened: what PostgreSQL does with such a transaction.
      const exit = yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`SET LOCAL idle_in_transaction_session_timeout = 200`
        // Fixed: idle in the transaction past PostgreSQL's timeout, the wait under test.
        yield* Effect.sleep("600 millis")
        yield* sql`SELECT 1`
      })).pipe(Effect.exit)
      expect(exit._tag).toBe("Failure")
      // Answered as the database being unavailable (503), with the server's words; a failure, not
      // a defect of the ROLLBACK the lost session no longer needs.
      const failure = exit._tag === "Failure" ? Cause.squash(exit.cause) : undefined
      expect(exit._tag === "Failure" && Cause.hasDies(exit.cause)).toBe(false)
      const unavailable = isSqlError(failure) ? toUnavailable(failure) : undefined
      expect(unavailable?.message).toMatch(/idle-in-transaction timeout|connection closed/i)
      expect(yield* sql`SELECT 1 AS one`).toEqual([{ one: 1 }])
    }).pipe(Effect.provide(TemporaryPostgres), Effect.scoped))

  it.live("a session whose statement timed out, or that refused a write as read-only, is closed, never lent again", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const pidOf = sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.pipe(Effect.map(([row]) => row!.pid))
      const isOpen = (pid: number) =>
        Effect.map(
          sql<{ n: string }>`SELECT count(*) AS n FROM pg_stat_activity WHERE pid = ${pid}`,
          ([row]) => Number(row!.n) > 0
        )
      // Closed in the background once its checkout ends: asked again within a bound.
      const closedSoon = (pid: number) =>
        isOpen(pid).pipe(
          Effect.flatMap((open) => open ? Effect.fail("open" as const) : Effect.void),
          Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 50 }),
          Effect.as(true),
          Effect.orElseSucceed(() => false)
        )
      // The session's id, and the statement failing the transaction it runs in.
      const failing = (statement: Effect.Effect<unknown, unknown>) =>
        Effect.suspend(() => {
          let session = -1
          const run = Effect.flatMap(pidOf, (pid) => {
            session = pid
            return statement
          })
          return Effect.map(Effect.exit(sql.withTransaction(run)), (exit) => {
            expect(exit._tag).toBe("Failure")
            return session
          })
        })
      // Fixed: a statement of 1 s, cut by its 50 ms timeout.
      const timedOut = yield* failing(
        sql`SET LOCAL statement_timeout = 50`.pipe(Effect.andThen(sql`SELECT pg_sleep(1)`))
      )
      const refused = yield* failing(
        sql`SET TRANSACTION READ ONLY`.pipe(Effect.andThen(sql`INSERT INTO pets (name, category_id) VALUES ('x', 1)`))
      )
      expect(yield* closedSoon(timedOut)).toBe(true)
      expect(yield* closedSoon(refused)).toBe(true)
      // A statement that failed for its own fault leaves its session to be lent again.
      const faulty = yield* failing(sql`SELECT missing_column FROM pets`)
      expect(yield* isOpen(faulty)).toBe(true)
    }).pipe(Effect.provide(TemporaryPostgres), Effect.scoped))

  it.effect("runs the stores' direct statements on a session of its own, and in a transaction on the transaction's", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // Without it a store would fall back to effect/sql's statement, unseen.
      expect("runDirect" in sql).toBe(true)
      const executeDirect = directStatementsOf(sql)
      const names = (rows: ReadonlyArray<Record<string, unknown>>) => rows.map((row) => row["name"])
      const insert = "INSERT INTO pets (name, category_id) VALUES ($1, $2) RETURNING name"
      expect(yield* executeDirect(insert, ["Rex", 1], names)).toEqual(["Rex"])
      const inside = yield* Effect.gen(function*() {
        yield* sql`INSERT INTO pets (name, category_id) VALUES (${"Tom"}, ${2})`
        return yield* executeDirect("SELECT name FROM pets ORDER BY id", [], names)
      }).pipe(sql.withTransaction)
      expect(inside).toEqual(["Rex", "Tom"])
      const failed = yield* Effect.flip(executeDirect("SELECT missing_column FROM pets", [], names))
      expect(databaseWords(failed)).toMatch(/missing_column/)
    }).pipe(Effect.provide(TemporaryPostgres)))

  it.effect("keeps only the SHA-256 hash of a key, never the key", () =>
    Effect.gen(function*() {
      const { key } = yield* (yield* ApiKeys).create("alice")
      const rows = yield* (yield* SqlClient.SqlClient)`SELECT * FROM api_keys`
      expect(JSON.stringify(rows, (_, value) => typeof value === "bigint" ? String(value) : value)).not.toContain(
        Redacted.value(key)
      )
      expect(rows[0]).toMatchObject({ key_hash: hashKey(Redacted.value(key)) })
    }).pipe(Effect.provide(ApiKeys.Sql.pipe(Layer.provideMerge(TemporaryPostgres), Layer.provide(AppConfig.make())))))

  it.effect("serves the status filter in id order from its index", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`SET enable_seqscan = off`
      const plan = yield* sql<{ "QUERY PLAN": string }>`EXPLAIN
        SELECT ${
        sql.literal(petColumnNames.join(", "))
      } FROM pets WHERE status = 'sold' AND id > 10 ORDER BY id LIMIT 21`
      const text = plan.map((row) => row["QUERY PLAN"]).join("\n")
      expect(text).toContain("pets_status_id")
      expect(text).not.toContain("Sort")
    }).pipe(Effect.provide(TemporaryPostgres)))
})
