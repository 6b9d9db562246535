import { BunContext } from "@effect/platform-bun"
import { Migrator } from "@effect/sql"
import { SqliteClient, SqliteMigrator } from "@effect/sql-sqlite-bun"
import { Database } from "bun:sqlite"
import { Context, Effect, Layer, Option } from "effect"
import { accessSync, constants, existsSync, mkdirSync } from "node:fs"
import { dirname } from "node:path"
import { AppConfig, sqliteFilename } from "../AppConfig.js"
import { summarizeCause } from "../CauseSummary.js"
import { ObservabilityConfig } from "../Observability/ObservabilityConfig.js"
import { observeStatements } from "../Observability/SqliteStatements.js"
import createPets from "./sqlite-migrations/0001_create_pets.js"
import createApiKeys from "./sqlite-migrations/0002_create_api_keys.js"
import createSettings from "./sqlite-migrations/0003_create_settings.js"
import createIdempotencyKeys from "./sqlite-migrations/0004_create_idempotency_keys.js"

export const migrations = Migrator.fromRecord({
  "0001_create_pets": createPets,
  "0002_create_api_keys": createApiKeys,
  "0003_create_settings": createSettings,
  "0004_create_idempotency_keys": createIdempotencyKeys
})

/**
 * The open SQLite database, for the stores' prepared statements. Statements through `@effect/sql`
 * cost about 30 µs each in spans, scopes, a semaphore and statement building, several times the
 * query itself; the stores run every request, so they prepare their statements once on this
 * connection instead. `bun:sqlite` is synchronous, so a statement never interleaves with another.
 */
export class Sqlite extends Context.Tag("petstore/Sqlite")<Sqlite, Database>() {
  /**
   * The database `DATABASE_URL` names: folder created on first start, the numbered migrations run
   * (through `@effect/sql`'s migrator) before anything is served, then WAL with
   * `synchronous=NORMAL` (a commit does not wait for fsync; the WAL keeps it durable across a
   * process crash), a busy timeout for other writers, and foreign keys enforced.
   */
  static readonly layer = Layer.scoped(
    Sqlite,
    Effect.gen(function*() {
      const { databaseUrl } = yield* AppConfig
      const filename = sqliteFilename(databaseUrl)
      yield* Effect.try({ try: () => checkWritable(filename), catch: (cause) => cause as Error })
      yield* SqliteMigrator.run({ loader: migrations }).pipe(
        Effect.provide(SqliteClient.layer({ filename })),
        Effect.provide(BunContext.layer),
        Effect.catchAllCause((cause) => Effect.fail(cannotUse(filename, summarizeCause(cause))))
      )
      const observability = yield* Effect.serviceOption(ObservabilityConfig)
      const db = yield* Effect.acquireRelease(
        Effect.try({
          try: () => {
            const db = new Database(filename, { readwrite: true, create: false, strict: true })
            db.run("PRAGMA journal_mode = WAL")
            db.run("PRAGMA synchronous = NORMAL")
            db.run("PRAGMA busy_timeout = 5000")
            db.run("PRAGMA foreign_keys = ON")
            return db
          },
          catch: (cause) => cannotUse(filename, String(cause))
        }),
        (db) => Effect.sync(() => db.close())
      )
      if (Option.isNone(observability)) return db
      const { metrics, tracing } = observability.value
      return Option.isNone(metrics) && Option.isNone(tracing) ? db : observeStatements(db, { tracing: Option.isSome(tracing) })
    })
  )
}

/**
 * Refuses, before SQLite touches anything, a database the service could read but not write: the
 * folder is created if missing, and it and the file must be writable (WAL and journal files live
 * beside the database).
 */
const checkWritable = (filename: string) => {
  const folder = dirname(filename)
  try {
    mkdirSync(folder, { recursive: true })
  } catch (cause) {
    throw new Error(`Cannot create the folder ${folder} of the database: ${reason(cause)}`)
  }
  try {
    accessSync(folder, constants.W_OK)
  } catch (cause) {
    throw new Error(`The folder ${folder} of the database is not writable (SQLite keeps its WAL beside the file): ${reason(cause)}`)
  }
  if (!existsSync(filename)) return
  try {
    accessSync(filename, constants.R_OK | constants.W_OK)
  } catch (cause) {
    throw new Error(`The database ${filename} is read-only or unreadable; it was left untouched: ${reason(cause)}`)
  }
}

const reason = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

const hints: ReadonlyArray<readonly [RegExp, string]> = [
  [/not a database|malformed/i, "it is not a SQLite database, or it is damaged"],
  [/disk is full|SQLITE_FULL/i, "the disk is full"],
  [/readonly|read-only/i, "it is read-only"]
]

const cannotUse = (filename: string, message: string) => {
  const hint = hints.find(([pattern]) => pattern.test(message))?.[1]
  return new Error(
    `Cannot use the database ${filename}${hint === undefined ? "" : ` (${hint})`}: ${message}. Nothing in it was changed.`
  )
}
