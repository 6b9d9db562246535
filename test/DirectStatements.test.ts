import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, type Layer, Option } from "effect"
import { rowsOrDie } from "../src/Sql/DirectStatements.js"
import { TemporaryPostgres } from "./support/PostgresStores.js"
import { TemporarySqlite } from "./support/SqliteStores.js"

const databases: ReadonlyArray<readonly [string, Layer.Layer<SqlClient.SqlClient, unknown>]> = [
  ["SQLite", TemporarySqlite],
  ["PostgreSQL", TemporaryPostgres]
]

const defectOf = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.dieOption(exit.cause)) : undefined

for (const [name, database] of databases) {
  describe(`a statement's rows read with rowsOrDie, ${name}`, () => {
    it.effect("gives the mapped rows, outside a transaction and inside one, where it sees the transaction's writes", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const names = (rows: ReadonlyArray<{ readonly name: string }>) => rows.map((row) => row.name)
        yield* sql`INSERT INTO pets (name, category_id) VALUES (${"Rex"}, ${1})`
        expect(yield* rowsOrDie(sql<{ name: string }>`SELECT name FROM pets ORDER BY id`, names)).toEqual(["Rex"])
        const inside = yield* Effect.gen(function*() {
          yield* sql`INSERT INTO pets (name, category_id) VALUES (${"Tom"}, ${2})`
          return yield* rowsOrDie(sql<{ name: string }>`SELECT name FROM pets ORDER BY id`, names)
        }).pipe(sql.withTransaction)
        expect(inside).toEqual(["Rex", "Tom"])
      }).pipe(Effect.provide(database)))

    it.effect("makes a failing statement a defect carrying the database's words, and a throwing mapping a defect", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const failed = yield* Effect.exit(rowsOrDie(sql`SELECT nothing FROM pets`, (rows) => rows.length))
        const defect = defectOf(failed)
        expect(defect).toBeInstanceOf(SqlError)
        expect(String((defect as SqlError).cause)).toMatch(/nothing/)
        const thrown = yield* Effect.exit(rowsOrDie(sql`SELECT id FROM pets`, () => {
          throw new Error("not the table's shape")
        }))
        expect(defectOf(thrown)).toMatchObject({ message: "not the table's shape" })
        // Nothing was left holding the connection: the next statement and transaction run.
        const inserted = yield* sql`INSERT INTO pets (name, category_id) VALUES (${"Rex"}, ${1})`.pipe(
          Effect.zipRight(rowsOrDie(sql<{ count: number | string }>`SELECT count(*) AS count FROM pets`, (rows) => Number(rows[0]!.count))),
          sql.withTransaction
        )
        expect(inserted).toBe(1)
      }).pipe(Effect.provide(database)))
  })
}
