import { Effect } from "effect"
import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs"
import { dirname } from "node:path"
import { connect, describeStoreFailure, MoveError, type Store } from "./Store.js"
import { countRows, tables } from "./Tables.js"

/**
 * An online backup of a SQLite database: `VACUUM INTO` a file beside the target name, which
 * SQLite writes from one read snapshot while the service goes on writing (WAL), then checked
 * (`PRAGMA integrity_check`) and renamed into place, so the name never holds a partial copy.
 */
export const backup = (store: Store, file: string) =>
  Effect.gen(function*() {
    if (store.engine !== "sqlite") {
      return yield* new MoveError({
        message: `backup: ${store.label} is PostgreSQL; back it up with pg_dump, or copy it to a SQLite file with db copy`
      })
    }
    if (existsSync(file)) return yield* new MoveError({ message: `backup: ${file} already exists; name a new file` })
    // A fresh checkout has no `backups/`, the folder the documented command names.
    yield* Effect.try({
      try: () => mkdirSync(dirname(file), { recursive: true }),
      catch: (error) => new MoveError({ message: `backup: cannot make the folder of ${file}: ${(error as Error).message}` })
    })
    const partial = `${file}.partial`
    rmSync(partial, { force: true })
    const startedAt = performance.now()
    yield* Effect.scoped(Effect.flatMap(
      connect(store, { role: "source", mode: "read" }),
      (sql) => sql`VACUUM INTO ${partial}`
    )).pipe(Effect.mapError((error) => describeStoreFailure(store, "source", error)))
    const written: Store = { engine: "sqlite", filename: partial, label: file }
    const counts = yield* Effect.scoped(Effect.gen(function*() {
      const sql = yield* connect(written, { role: "backup", mode: "read" })
      const [check] = yield* sql<{ integrity_check: string }>`PRAGMA integrity_check`
      if (check?.integrity_check !== "ok") {
        return yield* new MoveError({ message: `backup ${file} failed its integrity check: ${check?.integrity_check}` })
      }
      return yield* Effect.forEach(tables, (table) => countRows(sql, table))
    })).pipe(Effect.mapError((error) => describeStoreFailure(written, "backup", error)))
    renameSync(partial, file)
    const seconds = (performance.now() - startedAt) / 1000
    return `backed up ${store.label} to ${file} in ${seconds.toFixed(1)} s (integrity check ok; ` +
      `${tables.map((table, i) => `${table.name} ${counts[i]}`).join(", ")})`
  }).pipe(Effect.onError(() => Effect.sync(() => rmSync(`${file}.partial`, { force: true }))))
