import { Layer } from "effect"
import { runMigrations } from "./Migrations.js"
import * as SqliteClient from "./SqliteClient.js"

/** A migrated SQLite database in this process's memory, gone with it: the stores for tests and for composing alone. */
export const MemoryDatabase = Layer.effectDiscard(runMigrations).pipe(
  Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })),
  Layer.orDie
)
