import { BunContext } from "@effect/platform-bun"
import { Migrator } from "@effect/sql"
import { SqliteClient, SqliteMigrator } from "@effect/sql-sqlite-bun"
import { Database } from "bun:sqlite"
import { Context, Effect, Layer } from "effect"
import { mkdirSync } from "node:fs"
import { dirname } from "node:path"
import { AppConfig } from "../AppConfig.js"
import createPets from "./sqlite-migrations/0001_create_pets.js"
import createApiKeys from "./sqlite-migrations/0002_create_api_keys.js"
import createSettings from "./sqlite-migrations/0003_create_settings.js"
import createIdempotencyKeys from "./sqlite-migrations/0004_create_idempotency_keys.js"
import createRateLimitBuckets from "./sqlite-migrations/0005_create_rate_limit_buckets.js"

const migrations = Migrator.fromRecord({
  "0001_create_pets": createPets,
  "0002_create_api_keys": createApiKeys,
  "0003_create_settings": createSettings,
  "0004_create_idempotency_keys": createIdempotencyKeys,
  "0005_create_rate_limit_buckets": createRateLimitBuckets
})

/** The SQLite file a `DATABASE_URL` names: a path, `sqlite:path` or `file:path`. */
export const sqliteFilename = (databaseUrl: string): string => databaseUrl.replace(/^(sqlite|file):(\/\/)?/, "")

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
      yield* Effect.try({
        try: () => mkdirSync(dirname(filename), { recursive: true }),
        catch: (cause) => new Error(`Cannot create the folder of the database ${filename}: ${cause}`)
      })
      yield* SqliteMigrator.run({ loader: migrations }).pipe(
        Effect.provide(SqliteClient.layer({ filename })),
        Effect.provide(BunContext.layer)
      )
      return yield* Effect.acquireRelease(
        Effect.try({
          try: () => {
            const db = new Database(filename, { readwrite: true, create: false, strict: true })
            db.run("PRAGMA journal_mode = WAL")
            db.run("PRAGMA synchronous = NORMAL")
            db.run("PRAGMA busy_timeout = 5000")
            db.run("PRAGMA foreign_keys = ON")
            return db
          },
          catch: (cause) => new Error(`Cannot open the database ${filename}: ${cause}`)
        }),
        (db) => Effect.sync(() => db.close())
      )
    })
  )
}
