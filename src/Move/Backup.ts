import { Effect, Option } from "effect"
import type { SqlClient } from "effect/sql"
import { isSqlError } from "effect/sql/SqlError"
import * as fs from "node:fs"
import { dirname } from "node:path"
import * as Ids from "./Ids.js"
import { knownVersion, migrationsTable, tablesOf, versionOf } from "./SchemaVersion.js"
import {
  codeOf,
  companions,
  connect,
  describeStoreFailure,
  failingAs,
  interruption,
  MoveError,
  openSqlite,
  removeWithCompanions,
  type Store
} from "./Store.js"
import { countRows, tables } from "./Tables.js"

/** Removes, on a failure, what the command wrote beside the database, where it could write at all. */
const removingOnFailure = (file: string) =>
  Effect.onError(() => Effect.ignore(Effect.try(() => removeWithCompanions(file))))

const checkIntegrity = (sql: SqlClient.SqlClient, what: string) =>
  Effect.flatMap(sql<{ integrity_check: string }>`PRAGMA integrity_check`, ([row]) =>
    row?.integrity_check === "ok"
      ? Effect.void
      : Effect.fail(new MoveError({ message: `${what} failed its integrity check: ${row?.integrity_check}` })))

const rowCounts = (sql: SqlClient.SqlClient) =>
  Effect.flatMap(tablesOf(sql), (names) =>
    Effect.forEach(
      tables.filter((table) => names.has(table.name)),
      (table) => Effect.map(countRows(sql, table), (count) => `${table.name} ${count}`)
    ))

/** SQLite's failures that come from writing the backup's file (its disk, its folder): the backup's to report. */
const writeFailures = ["SQLITE_FULL", "SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_IOERR", "SQLITE_PERM"]

/** An online backup: `VACUUM INTO` a file beside the name from one snapshot, checked, then renamed into place. */
export const backup = (store: Store, file: string) => {
  const partial = `${file}.partial`
  const written: Store = { engine: "sqlite", filename: partial, label: file }
  const onBackup = (error: unknown) => describeStoreFailure(written, "backup", error)
  return Effect.gen(function*() {
    if (store.engine !== "sqlite") {
      return yield* new MoveError({
        message:
          `backup: ${store.label} is PostgreSQL; back it up with pg_dump, or copy it to a SQLite file with db copy`
      })
    }
    if (fs.existsSync(file)) return yield* new MoveError({ message: `backup: ${file} already exists; name a new file` })
    // Made empty first, so that a folder SQLite cannot write in is told as the backup's.
    yield* Effect.try({
      try: () => {
        if (!fs.existsSync(dirname(file))) fs.mkdirSync(dirname(file), { recursive: true })
        removeWithCompanions(partial)
        fs.closeSync(fs.openSync(partial, "wx"))
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
    )).pipe(failingAs(store, "source"))
    const counts = yield* connect(written, { role: "backup", mode: "read" }).pipe(
      Effect.tap((sql) => checkIntegrity(sql, `backup ${file}`)),
      Effect.flatMap(rowCounts),
      Effect.scoped,
      Effect.mapError(onBackup)
    )
    yield* Effect.try({ try: () => fs.renameSync(partial, file), catch: onBackup })
    const seconds = (performance.now() - startedAt) / 1000
    return `backed up ${store.label} to ${file} in ${seconds.toFixed(1)} s (integrity check ok; ${counts.join(", ")})`
  }).pipe(removingOnFailure(partial))
}

const refused = (message: string) => new MoveError({ message: `restore: ${message}` })

/** One connection on a SQLite file that waits for no other process's lock, and leaves its journal mode as it is. */
const open = (filename: string) => openSqlite({ filename, create: false, disableWAL: true })

/** Writes a file's (or a folder's entries') data to the disk before the rename is relied on. */
const fsyncPath = (path: string) => {
  const fd = fs.openSync(path, "r")
  try {
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}

/** The restore's copy of the backup checked: SQLite's check of every page, a schema this build can migrate. */
const checkBackup = (copy: string, backupFile: string) =>
  Effect.gen(function*() {
    const sql = yield* open(copy)
    yield* checkIntegrity(sql, `restore: the backup ${backupFile}`)
    const version = yield* versionOf(sql)
    const known = yield* knownVersion
    if (Option.isNone(version)) {
      return yield* refused(`${backupFile} is not a backup of the Pet Store: it has no ${migrationsTable} table`)
    }
    if (version.value > known) {
      return yield* refused(
        `the backup ${backupFile} has schema version ${version.value}, but this build knows schema version ${known}; ` +
          "restore it with the build that wrote it"
      )
    }
    return yield* rowCounts(sql)
  })

const idsUnknown = (why: string) => `${why}; the ids it handed out since the backup cannot be read, and may repeat`

const withoutIds = (why: string) => refused(`${idsUnknown(why)}; give --ids-may-repeat to restore anyway`)

/** The replaced file's ids, read under its exclusive lock (held to the rename), refused while a service runs on it. */
const holdReplaced = (store: Store & { readonly engine: "sqlite" }, idsMayRepeat: boolean) => {
  const unknown = (why: string) =>
    idsMayRepeat ? Effect.succeed({ handedOut: undefined, warning: idsUnknown(why) }) : Effect.fail(withoutIds(why))
  if (!fs.existsSync(store.filename)) return unknown(`${store.label} is gone`)
  return Effect.gen(function*() {
    const sql = yield* open(store.filename)
    // Before the first read: SQLite then asks for the exclusive lock at once, and keeps it.
    yield* sql`PRAGMA locking_mode = EXCLUSIVE`
    const handedOut = new Map<string, number>()
    for (const table of yield* Ids.sequencedIn(sql)) handedOut.set(table.name, yield* Ids.lastHandedOut(sql, table))
    // Its WAL written back and removed, none left under the name; then the lock held whatever the mode.
    yield* sql`PRAGMA journal_mode = DELETE`
    yield* sql`BEGIN EXCLUSIVE`
    return { handedOut, warning: undefined }
  }).pipe(Effect.catch((error) =>
    isSqlError(error) && error.reason._tag === "LockTimeoutError"
      ? Effect.fail(refused(
        `${store.label} is open in another process (SQLite's lock on the file is held, as a service running on it holds it); ` +
          "stop the service, then restore"
      ))
      : unknown(describeStoreFailure(store, "the", error).message)
  ))
}

/** Puts a `db backup` back over the SQLite file: copied beside it, checked, its ids raised, renamed over it. */
export const restore = (store: Store, backupFile: string, options: { readonly idsMayRepeat: boolean }) => {
  if (store.engine !== "sqlite") {
    return Effect.fail(refused(
      `${store.label} is PostgreSQL; restore its pg_dump with pg_restore, then set its ids with db restore-ids (docs/operations.md)`
    ))
  }
  const target = store.filename
  const copy = `${target}.restoring`
  const onCopy = failingAs({ ...store, filename: copy, label: copy }, "restore: the copy")
  return Effect.gen(function*() {
    interruption.line = `interrupted: nothing was restored; ${target} is as it was before`
    if (!fs.existsSync(backupFile)) return yield* refused(`the backup ${backupFile}: no such file`)
    const [backupStat, targetStat] = [fs.statSync(backupFile), fs.statSync(target, { throwIfNoEntry: false })]
    if (targetStat !== undefined && backupStat.dev === targetStat.dev && backupStat.ino === targetStat.ino) {
      return yield* refused(`${backupFile} is the database itself; name a backup made by db backup`)
    }
    if ((fs.statSync(`${backupFile}-wal`, { throwIfNoEntry: false })?.size ?? 0) > 0) {
      return yield* refused(
        `the backup ${backupFile} has a write-ahead log beside it, which a copy of the file alone would leave out: ` +
          "a process has it open, or did not close it; back it up with db backup"
      )
    }
    // Before anything is written beside it.
    if (!fs.existsSync(target) && !options.idsMayRepeat) return yield* withoutIds(`${store.label} is gone`)
    const startedAt = performance.now()
    yield* onCopy(Effect.try(() => {
      fs.mkdirSync(dirname(target), { recursive: true })
      removeWithCompanions(copy)
      fs.copyFileSync(backupFile, copy, fs.constants.COPYFILE_EXCL)
    }))
    const counts = yield* Effect.scoped(checkBackup(copy, backupFile)).pipe(
      failingAs({ ...store, filename: copy, label: backupFile }, "restore: the backup")
    )
    // Its lock held by the restore's scope, past the rename.
    const { handedOut, warning } = yield* holdReplaced(store, options.idsMayRepeat)
    // The copy's next ids above its own and above every id the replaced file handed out.
    const next = yield* Effect.flatMap(
      open(copy),
      (sql) => Ids.raiseNextIds(sql, (table) => handedOut?.get(table.name) ?? 0)
    ).pipe(Effect.scoped, onCopy)
    yield* onCopy(Effect.try(() => {
      fsyncPath(copy)
      for (const suffix of companions) fs.rmSync(`${target}${suffix}`, { force: true })
      fs.renameSync(copy, target)
      interruption.line = `interrupted: ${target} was restored from ${backupFile}`
      fsyncPath(dirname(target))
    }))
    const seconds = (performance.now() - startedAt) / 1000
    const ids = warning === undefined ? "above every id the replaced file handed out" : "the backup's own"
    if (warning !== undefined) process.stderr.write(`warning: ${warning}\n`)
    return `restored ${target} from ${backupFile} in ${seconds.toFixed(1)} s (integrity check ok; ` +
      `${counts.join(", ")}); next ids ${next.map((id) => `${id.name} ${id.next}`).join(", ")}, ${ids}`
  }).pipe(Effect.scoped, removingOnFailure(copy))
}
