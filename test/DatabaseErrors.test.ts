import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, type Layer } from "effect"
import { SqlClient } from "effect/sql"
import {
  ConnectionError,
  isSqlError,
  LockTimeoutError,
  SqlError,
  SqlSyntaxError,
  StatementTimeoutError,
  UniqueViolation,
  UnknownError
} from "effect/sql/SqlError"
import { DatabaseUnavailable } from "../src/Domain/DatabaseUnavailable.js"
import { isReadOnly, toUnavailable, unavailableOrDie } from "../src/Sql/DatabaseErrors.js"
import { TemporaryPostgres } from "./support/PostgresStores.js"
import { TemporarySqlite } from "./support/SqliteStores.js"

const databases: ReadonlyArray<readonly [string, Layer.Layer<SqlClient.SqlClient, unknown>]> = [
  ["SQLite", TemporarySqlite],
  ["PostgreSQL", TemporaryPostgres]
]

const defectOf = (exit: Exit.Exit<unknown, unknown>) => Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined

for (const [name, database] of databases) {
  describe(`a store's statement through unavailableOrDie, ${name}`, () => {
    it.effect("gives its rows, outside a transaction and inside one, where it sees the transaction's writes", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const names = (rows: ReadonlyArray<{ readonly name: string }>) => rows.map((row) => row.name)
        const listed = Effect.map(unavailableOrDie(sql<{ name: string }>`SELECT name FROM pets ORDER BY id`), names)
        yield* sql`INSERT INTO pets (name, category_id) VALUES (${"Rex"}, ${1})`
        expect(yield* listed).toEqual(["Rex"])
        const inside = yield* Effect.gen(function*() {
          yield* sql`INSERT INTO pets (name, category_id) VALUES (${"Tom"}, ${2})`
          return yield* listed
        }).pipe(sql.withTransaction)
        expect(inside).toEqual(["Rex", "Tom"])
      }).pipe(Effect.provide(database)))

    it.effect("makes a faulty statement a defect carrying the database's words; the connection is free afterwards", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const failed = yield* Effect.exit(unavailableOrDie(sql`SELECT missing_column FROM pets`))
        const defect = defectOf(failed)
        expect(Exit.isFailure(failed) && Cause.hasDies(failed.cause)).toBe(true)
        expect(isSqlError(defect)).toBe(true)
        expect((defect as SqlError).message).toMatch(/missing_column/)
        // Nothing was left holding the connection: the next statement and transaction run.
        const counted = yield* sql`INSERT INTO pets (name, category_id) VALUES (${"Rex"}, ${1})`.pipe(
          Effect.andThen(unavailableOrDie(sql<{ count: number | string }>`SELECT count(*) AS count FROM pets`)),
          sql.withTransaction
        )
        expect(Number(counted[0]!.count)).toBe(1)
      }).pipe(Effect.provide(database)))
  })
}

describe("what a failed statement's reason means for a request", () => {
  const failed = (reason: SqlError["reason"]) => new SqlError({ reason })
  const driverError = (code: string, message: string) => Object.assign(new Error(message), { code })

  it("a database away, busy, read-only or full is DatabaseUnavailable with the database's own words", () => {
    const cases: ReadonlyArray<readonly [SqlError, DatabaseUnavailable["reason"], string]> = [
      [
        failed(new ConnectionError({ cause: driverError("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:1") })),
        "unavailable",
        "connect ECONNREFUSED 127.0.0.1:1"
      ],
      [
        failed(new LockTimeoutError({ cause: driverError("SQLITE_BUSY", "database is locked") })),
        "busy",
        "database is locked"
      ],
      [
        failed(
          new StatementTimeoutError({ cause: driverError("57014", "canceling statement due to statement timeout") })
        ),
        "busy",
        "canceling statement due to statement timeout"
      ],
      [
        failed(
          new UnknownError({ cause: driverError("57P01", "terminating connection due to administrator command") })
        ),
        "unavailable",
        "terminating connection due to administrator command"
      ],
      [
        failed(new UnknownError({ cause: driverError("53300", "sorry, too many clients already") })),
        "unavailable",
        "sorry, too many clients already"
      ],
      [
        failed(
          new UnknownError({ cause: driverError("25P03", "terminating connection due to idle-in-transaction timeout") })
        ),
        "unavailable",
        "terminating connection due to idle-in-transaction timeout"
      ],
      [
        failed(new UnknownError({ cause: driverError("SQLITE_FULL", "database or disk is full") })),
        "full",
        "database or disk is full"
      ],
      [
        failed(new UnknownError({ cause: driverError("53100", "could not extend file") })),
        "full",
        "could not extend file"
      ],
      [
        failed(
          new UnknownError({ cause: driverError("SQLITE_READONLY_DBMOVED", "attempt to write a readonly database") })
        ),
        "read_only",
        "attempt to write a readonly database"
      ],
      [
        failed(new UnknownError({ cause: driverError("25006", "cannot execute INSERT in a read-only transaction") })),
        "read_only",
        "cannot execute INSERT in a read-only transaction"
      ],
      [
        failed(new UnknownError({ cause: driverError("SQLITE_CORRUPT", "database disk image is malformed") })),
        "unavailable",
        "database disk image is malformed"
      ]
    ]
    for (const [error, reason, message] of cases) {
      expect(toUnavailable(error)).toEqual(new DatabaseUnavailable({ reason, message }))
      // A refused write, by its code alone (a standby says 25006 too), never by the words.
      expect(isReadOnly(error)).toBe(reason === "read_only")
    }
  })

  it("a fault of the statement is not: unavailableOrDie makes it a defect", async () => {
    const faults = [
      failed(new SqlSyntaxError({ cause: driverError("42601", "syntax error at or near \"FORM\"") })),
      failed(new UniqueViolation({ cause: driverError("23505", "duplicate key"), constraint: "pets_pkey" })),
      failed(new UnknownError({ cause: driverError("XX000", "internal error") })),
      failed(new UnknownError({ cause: "no code at all" }))
    ]
    for (const fault of faults) {
      expect(toUnavailable(fault)).toBeUndefined()
      const exit = await Effect.runPromiseExit(unavailableOrDie(Effect.fail(fault)))
      expect(Exit.isFailure(exit) && Cause.hasDies(exit.cause)).toBe(true)
    }
    const busy = await Effect.runPromiseExit(
      unavailableOrDie(
        Effect.fail(failed(new LockTimeoutError({ cause: driverError("55P03", "could not obtain lock") })))
      )
    )
    expect(busy).toEqual(Exit.fail(new DatabaseUnavailable({ reason: "busy", message: "could not obtain lock" })))
  })
})
