/**
 * What one read of a pet by id costs the service's process, in µs of CPU per statement, by the
 * way it is run: 16 fibers at a time, the median of rounds alternating between the ways.
 *
 *   bun scripts/bench/statements.ts [--rounds N] [--only sqlite|postgres]
 *
 * SQLite (a file of its own, 1,000 pets): the service's client (`src/Sql/SqliteClient.ts`, the row
 * taken and the failure mapped by `unavailableOrDie`) with its statements timed (metrics on) and
 * untimed, and a prepared `bun:sqlite` statement in `Effect.sync`, the floor. PostgreSQL (a
 * throwaway cluster on a loopback port): `@effect/sql-pg`'s own client, and the service's
 * (`PostgresConnection`, the same library with the service's settings). All run on the service's
 * tracing layer as configured by default (tracing off); the PostgreSQL figures include the
 * client's work on the wire.
 */
import { PgClient } from "@effect/sql-pg"
import { Database } from "bun:sqlite"
import { Context, Effect, Layer, Redacted } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { AppConfig } from "../../src/Config/AppConfig.js"
import { ObservabilityConfig } from "../../src/Observability/ObservabilityConfig.js"
import { TracingLive } from "../../src/Observability/Tracing.js"
import { unavailableOrDie } from "../../src/Sql/DatabaseErrors.js"
import { runMigrations } from "../../src/Sql/Migrations.js"
import { petColumnNames } from "../../src/Sql/PetColumns.js"
import { PostgresConnection } from "../../src/Sql/PostgresConnection.js"
import * as SqliteClient from "../../src/Sql/SqliteClient.js"
import { statementDurations } from "../../src/Sql/StatementTiming.js"
import { startPostgresCluster } from "../../test/support/PostgresCluster.js"
import { args, numberOption } from "../options.js"

const rounds = numberOption("--rounds", 15)
const only = args.includes("--only") ? args[args.indexOf("--only") + 1] : undefined
const pets = 1000
const perRound = 16_000

type Read = (id: number) => Effect.Effect<unknown, unknown>

/** µs of CPU per read, `perRound` reads 16 at a time. */
const cpuPerRead = (read: Read) =>
  Effect.gen(function*() {
    const before = process.cpuUsage()
    yield* Effect.forEach(
      Array.from({ length: 16 }, (_, fiber) => fiber),
      (fiber) =>
        Effect.forEach(Array.from({ length: perRound / 16 }, (_, i) => i), (i) => read(1 + ((i * 16 + fiber) % pets)), {
          discard: true
        }),
      { concurrency: "unbounded", discard: true }
    )
    const used = process.cpuUsage(before)
    return (used.user + used.system) / perRound
  })

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

/** Each way warmed up, then measured in turns; one line per way. */
const compare = (engine: string, ways: Record<string, Read>) =>
  Effect.gen(function*() {
    const samples: Record<string, Array<number>> = {}
    for (const [name, read] of Object.entries(ways)) {
      yield* cpuPerRead(read)
      samples[name] = []
    }
    for (let round = 0; round < rounds; round++) {
      for (const [name, read] of Object.entries(ways)) samples[name]!.push(yield* cpuPerRead(read))
    }
    for (const [name, values] of Object.entries(samples)) {
      console.log(`${engine}\t${name.padEnd(40)}\t${median(values).toFixed(2)} µs/read`)
    }
  })

/** The pets' columns, as the store selects them. */
const columnList = petColumnNames.join(", ")

/** A read by id as the stores write it: the first row, a database that cannot serve a typed failure. */
const byIdOf = (sql: SqlClient.SqlClient) => {
  const columns = sql.literal(columnList)
  return (id: number) => unavailableOrDie(Effect.map(sql`SELECT ${columns} FROM pets WHERE id = ${id}`, (rows) => rows[0]))
}

const sqlite = Effect.gen(function*() {
  const folder = yield* Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "petstore-statements-"))),
    (folder) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
  )
  const filename = join(folder, "pets.sqlite")
  const timed = yield* SqliteClient.make({ filename, timer: statementDurations("sqlite") })
  const untimed = yield* SqliteClient.make({ filename })
  // The service's own migrations make the tables, as its layer does on PostgreSQL below.
  yield* Effect.provideService(runMigrations, SqlClient.SqlClient, timed)
  yield* timed`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${pets})
    INSERT INTO pets (name, category_id, status) SELECT 'Rex ' || i, 1, 'available' FROM n`
  const prepared = yield* Effect.acquireRelease(
    Effect.sync(() => new Database(filename, { readonly: true })),
    (db) => Effect.sync(() => db.close())
  ).pipe(Effect.map((db) => db.query(`SELECT ${columnList} FROM pets WHERE id = ?`)))
  yield* compare("SQLite", {
    "the service's client, timed": byIdOf(timed),
    "the service's client, untimed": byIdOf(untimed),
    "a prepared bun:sqlite statement": (id) => Effect.sync(() => prepared.get(id))
  })
}).pipe(Effect.scoped, Effect.provide(Reactivity.layer))

const postgres = Effect.gen(function*() {
  const cluster = yield* Effect.acquireRelease(
    Effect.sync(() => startPostgresCluster(25_000 + Math.floor(Math.random() * 5_000))),
    (cluster) => Effect.sync(cluster.stop)
  )
  // The service's own layer makes the table (its migrations).
  const service = Context.get(
    yield* Layer.build(PostgresConnection.pipe(Layer.provide(AppConfig.make({ databaseUrl: cluster.url })))),
    SqlClient.SqlClient
  )
  const library = yield* PgClient.make({ url: Redacted.make(cluster.url), maxConnections: 20 })
  yield* library`INSERT INTO pets (name, category_id, status) SELECT 'Rex ' || i, 1, 'available' FROM generate_series(1, ${pets}) AS i`
  yield* compare("PostgreSQL", {
    "@effect/sql-pg's own client": byIdOf(library),
    "the service's client": byIdOf(service)
  })
}).pipe(Effect.scoped, Effect.provide(Reactivity.layer))

await Effect.runPromise(
  Effect.gen(function*() {
    if (only !== "postgres") yield* sqlite
    if (only !== "sqlite") yield* postgres
  }).pipe(Effect.provide(TracingLive.pipe(Layer.provide(ObservabilityConfig.make()))))
)
