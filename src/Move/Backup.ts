import { Effect } from "effect"
import { closeSync, existsSync, mkdirSync, openSync, renameSync, rmSync } from "node:fs"
import { dirname } from "node:path"
import { connect, describeStoreFailure, MoveError, type Store } from "./Store.js"
import { countRows, tables } from "./Tables.js"

/**
 * SQLite's failures that come from writing the backup's file (its disk, its folder), not from
 * reading the store: they are the backup's to report.
 */
const writeFailures = ["SQLITE_FULL", "SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_IOERR", "SQLITE_PERM"]

const codeOf = (error: unknown): string => {
  const cause = error !== null && typeof error === "object" && "reason" in error
    ? (error.reason as { cause?: unknown }).cause
    : error
  return cause !== null && typeof cause === "object" && "code" in cause ? String(cause.code) : ""
}

/**
 * An online backup of a SQLite database: `VACUUM INTO` a file beside the target name, which
 * SQLite writes from one read snapshot while the service goes on writing (WAL), then checked
 * (`PRAGMA integrity_check`) and renamed into place, so the name never holds a partial copy. A
 * failure to write (the folder missing or read-only, the disk full) names the backup, and the
 * partial file and its journal are removed.
 */
export const backup = (store: Store, file: string) => {
  const partial = `${file}.partial`
  const written: Store = { engine: "sqlite", filename: partial, label: file }
  const onBackup = (error: unknown) => describeStoreFailure(written, "backup", error)
  const removePartial = () => {
    for (const suffix of ["", "-journal", "-wal", "-shm"]) {
      if (existsSync(`${partial}${suffix}`)) rmSync(`${partial}${suffix}`)
    }
  }
  return Effect.gen(function*() {
    if (store.engine !== "sqlite") {
      return yield* new MoveError({
        message:
          `backup: ${store.label} is PostgreSQL; back it up with pg_dump, or copy it to a SQLite file with db copy`
      })
    }
    if (existsSync(file)) return yield* new MoveError({ message: `backup: ${file} already exists; name a new file` })
    // Made empty here, before SQLite writes into it, so that a folder it cannot be written in is
    // told as the backup's; its folder made first (a fresh checkout has no `backups/`, the folder
    // the documented command names).
    yield* Effect.try({
      try: () => {
        if (!existsSync(dirname(file))) mkdirSync(dirname(file), { recursive: true })
        removePartial()
        closeSync(openSync(partial, "wx"))
      },
      catch: onBackup
    })
    const startedAt = performance.now()
    yield* Effect.scoped(Effect.flatMap(
      connect(store, { role: "source", mode: "read" }),
      (sql) =>
        Effect.mapError(
          sql`VACUUM INTO ${partial}`,
          (error) => writeFailures.some((code) => codeOf(error).startsWith(code)) ? onBackup(error) : error
        )
    )).pipe(Effect.mapError((error) => describeStoreFailure(store, "source", error)))
    const counts = yield* Effect.scoped(Effect.gen(function*() {
      const sql = yield* connect(written, { role: "backup", mode: "read" })
      const [check] = yield* sql<{ integrity_check: string }>`PRAGMA integrity_check`
      if (check?.integrity_check !== "ok") {
        return yield* new MoveError({ message: `backup ${file} failed its integrity check: ${check?.integrity_check}` })
      }
      return yield* Effect.forEach(tables, (table) => countRows(sql, table))
    })).pipe(Effect.mapError(onBackup))
    yield* Effect.try({ try: () => renameSync(partial, file), catch: onBackup })
    const seconds = (performance.now() - startedAt) / 1000
    return `backed up ${store.label} to ${file} in ${seconds.toFixed(1)} s (integrity check ok; ` +
      `${tables.map((table, i) => `${table.name} ${counts[i]}`).join(", ")})`
  }).pipe(Effect.onError(() =>
    Effect.sync(() => {
      try {
        removePartial()
      } catch {
        // Nothing could be written there either.
      }
    })
  ))
}
