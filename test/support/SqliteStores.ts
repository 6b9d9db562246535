import { Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { AppConfig } from "../../src/Config/AppConfig.js"
import { SqliteConnection } from "../../src/Sql/SqliteConnection.js"

/** A migrated SQLite database in a temporary folder, removed when the layer is released. */
export const TemporarySqlite = Layer.unwrap(
  Effect.gen(function*() {
    const folder = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "petstore-test-"))),
      (folder) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
    )
    return SqliteConnection.pipe(Layer.provide(AppConfig.make({ databaseUrl: join(folder, "pets.db") })))
  })
)
