import { BunContext } from "@effect/platform-bun"
import { Migrator } from "@effect/sql"
import { SqliteClient, SqliteMigrator } from "@effect/sql-sqlite-bun"
import { Effect, Layer } from "effect"
import { mkdirSync } from "node:fs"
import { dirname } from "node:path"
import { AppConfig } from "../AppConfig.js"
import createPets from "./migrations/0001_create_pets.js"
import createApiKeys from "./migrations/0002_create_api_keys.js"
import createSettings from "./migrations/0003_create_settings.js"

const migrations = Migrator.fromRecord({
  "0001_create_pets": createPets,
  "0002_create_api_keys": createApiKeys,
  "0003_create_settings": createSettings
})

/** The SQLite file a `DATABASE_URL` names: a path, `sqlite:path` or `file:path`. */
export const sqliteFilename = (databaseUrl: string): string => databaseUrl.replace(/^(sqlite|file):(\/\/)?/, "")

/**
 * The SQLite database: folder created on first start, WAL with `synchronous=NORMAL` (a commit does
 * not wait for fsync; the WAL keeps it durable across a process crash), a busy timeout for other
 * writers, and the numbered migrations run before anything is served.
 */
export const Database = Layer.unwrapEffect(
  Effect.gen(function*() {
    const { databaseUrl } = yield* AppConfig
    const filename = sqliteFilename(databaseUrl)
    if (filename !== ":memory:") {
      yield* Effect.try({
        try: () => mkdirSync(dirname(filename), { recursive: true }),
        catch: (cause) => new Error(`Cannot create the folder of the database ${filename}: ${cause}`)
      })
    }
    const client = SqliteClient.layer({ filename })
    const prepare = Layer.effectDiscard(
      Effect.gen(function*() {
        const sql = yield* SqliteClient.SqliteClient
        yield* sql`PRAGMA synchronous = NORMAL`
        yield* sql`PRAGMA busy_timeout = 5000`
        yield* sql`PRAGMA foreign_keys = ON`
        yield* SqliteMigrator.run({ loader: migrations })
      })
    )
    return Layer.provideMerge(prepare, client)
  })
).pipe(Layer.provide(BunContext.layer))
