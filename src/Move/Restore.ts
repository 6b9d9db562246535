import { Effect, Option } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { isSqlError } from "effect/sql/SqlError"
import {
  closeSync,
  constants,
  copyFileSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  renameSync,
  rmSync,
  statSync
} from "node:fs"
import { dirname } from "node:path"
import * as SqliteClient from "../Sql/SqliteClient.js"
import { interruption } from "./CleanUp.js"
import { knownVersion, migrationsTable, tablesOf, versionOf } from "./SchemaVersion.js"
import { lastHandedOut, nextId, sequencedTables, setNextId } from "./Sequences.js"
import { describeStoreFailure, MoveError, type Store } from "./Store.js"
import { countRows, tables } from "./Tables.js"

/**
 * What SQLite keeps beside a database while it is open, or after a crash: a file put under the
 * name must find none of them, or SQLite would read a WAL or journal of the replaced file as its own.
 */
const companions = ["-wal", "-shm", "-journal"]

const refused = (message: string) => new MoveError({ message: `restore: ${message}` })

/** One connection on a SQLite file that waits for no other process's lock, and leaves its journal mode as it is. */
const open = (filename: string) =>
  SqliteClient.make({ filename, readwrite: true, create: false, disableWAL: true }).pipe(
    Effect.catchDefect(Effect.fail),
    Effect.provide(Reactivity.layer)
  )

const isLocked = (error: unknown) => isSqlError(error) && error.reason._tag === "LockTimeoutError"

const sameFile = (a: string, b: string) => {
  const [first, second] = [statSync(a), statSync(b)]
  return first.dev === second.dev && first.ino === second.ino
}

const sizeOf = (file: string) => {
  try {
    return statSync(file).size
  } catch {
    return 0
  }
}

/** Writes a file's (or a folder's entries') data to the disk before the rename is relied on. */
const fsyncPath = (path: string) => {
  const fd = openSync(path, "r")
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/** The restore's copy of the backup checked as a backup of this service: SQLite's check of every page, a schema this build can migrate. */
const checkBackup = (copy: string, backupFile: string) =>
  Effect.gen(function*() {
    const sql = yield* open(copy)
    const [check] = yield* sql<{ integrity_check: string }>`PRAGMA integrity_check`
    if (check?.integrity_check !== "ok") {
      return yield* refused(`the backup ${backupFile} failed its integrity check: ${check?.integrity_check}`)
    }
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
    const names = yield* tablesOf(sql)
    return yield* Effect.forEach(tables.filter((table) => names.has(table.name)), (table) =>
      Effect.map(countRows(sql, table), (count) => `${table.name} ${count}`))
  })

/**
 * The ids the file being replaced handed out, read under SQLite's exclusive lock on it, which is
 * then held until the restored file has taken its name. A process with the file open in WAL mode
 * (every instance of the service: it turns WAL on at its start) holds a shared lock on it for as
 * long as it has it open, so the exclusive lock is refused while one runs, in another container too.
 */
const readReplaced = (file: string) =>
  Effect.gen(function*() {
    const sql = yield* open(file)
    // Before the first read: SQLite then asks for the exclusive lock at once, and keeps it.
    yield* sql`PRAGMA locking_mode = EXCLUSIVE`
    const names = yield* tablesOf(sql)
    const handedOut = new Map<string, number>()
    for (const table of sequencedTables(tables)) {
      if (names.has(table.name)) handedOut.set(table.name, yield* lastHandedOut(sql, table))
    }
    // Its WAL written back into it and removed, so that none is left under the name; then the
    // exclusive lock held whatever its journal mode was.
    yield* sql`PRAGMA journal_mode = DELETE`
    yield* sql`BEGIN EXCLUSIVE`
    return handedOut
  })

/** Why the replaced file's ids cannot be kept, in the one line a restore prints. */
const idsUnknown = (why: string) => `${why}; the ids it handed out since the backup cannot be read, and may repeat`

const withoutIds = (why: string) => refused(`${idsUnknown(why)}; give --ids-may-repeat to restore anyway`)

/** The ids the replaced file handed out, or why they cannot be read and whether to go on without them. */
const holdReplaced = (store: Store & { readonly engine: "sqlite" }, idsMayRepeat: boolean) => {
  const unknown = (why: string) =>
    idsMayRepeat
      ? Effect.succeed({ handedOut: Option.none<ReadonlyMap<string, number>>(), warning: Option.some(idsUnknown(why)) })
      : Effect.fail(withoutIds(why))
  if (!existsSync(store.filename)) return unknown(`${store.label} is gone`)
  return readReplaced(store.filename).pipe(
    Effect.map((handedOut) => ({
      handedOut: Option.some<ReadonlyMap<string, number>>(handedOut),
      warning: Option.none<string>()
    })),
    Effect.catch((error) =>
      isLocked(error)
        ? Effect.fail(refused(
          `${store.label} is open in another process (SQLite's lock on the file is held, as a service running on it holds it); ` +
            "stop the service, then restore"
        ))
        : unknown(describeStoreFailure(store, "the", error).message)
    )
  )
}

/** Sets the copy's next ids above its own and above every id the replaced file handed out. */
const setIds = (copy: string, handedOut: Option.Option<ReadonlyMap<string, number>>) =>
  Effect.gen(function*() {
    const sql = yield* open(copy)
    const names = yield* tablesOf(sql)
    return yield* sql.withTransaction(Effect.forEach(
      sequencedTables(tables).filter((table) => names.has(table.name)),
      (table) =>
        Effect.gen(function*() {
          const replaced = Option.match(handedOut, { onNone: () => 0, onSome: (ids) => ids.get(table.name) ?? 0 })
          const next = Math.max((yield* lastHandedOut(sql, table)) + 1, replaced + 1)
          if (next !== (yield* nextId(sql, table))) yield* setNextId(sql, table, next)
          return `${table.name} ${next}`
        })
    ))
  })

/**
 * Puts back a backup made by `db backup` in place of the SQLite file, the service stopped: the
 * backup copied beside the file and checked there (the backup itself is only read), its next ids
 * set above every id the replaced file handed out, then renamed over it. A bad backup, or a file
 * a service has open, is refused with the file as it was. Where the replaced file is gone or cannot
 * be read, its ids cannot be kept: refused unless `idsMayRepeat`.
 */
export const restore = (store: Store, backupFile: string, options: { readonly idsMayRepeat: boolean }) => {
  if (store.engine !== "sqlite") {
    return Effect.fail(refused(
      `${store.label} is PostgreSQL; restore its pg_dump with pg_restore, then set its ids with db restore-ids (docs/operations.md)`
    ))
  }
  const target = store.filename
  const copy = `${target}.restoring`
  const onBackup = (error: unknown) =>
    describeStoreFailure({ ...store, filename: copy, label: backupFile }, "restore: the backup", error)
  const onCopy = (error: unknown) =>
    describeStoreFailure({ ...store, filename: copy, label: copy }, "restore: the copy", error)
  const removeCopy = () => {
    for (const suffix of ["", ...companions]) rmSync(`${copy}${suffix}`, { force: true })
  }
  return Effect.gen(function*() {
    interruption.line = `interrupted: nothing was restored; ${target} is as it was before`
    if (!existsSync(backupFile)) return yield* refused(`the backup ${backupFile}: no such file`)
    if (existsSync(target) && sameFile(backupFile, target)) {
      return yield* refused(`${backupFile} is the database itself; name a backup made by db backup`)
    }
    if (sizeOf(`${backupFile}-wal`) > 0) {
      return yield* refused(
        `the backup ${backupFile} has a write-ahead log beside it, which a copy of the file alone would leave out: ` +
          "a process has it open, or did not close it; back it up with db backup"
      )
    }
    // Before anything is written beside it.
    if (!existsSync(target) && !options.idsMayRepeat) return yield* withoutIds(`${store.label} is gone`)
    const startedAt = performance.now()
    yield* Effect.try({
      try: () => {
        mkdirSync(dirname(target), { recursive: true })
        removeCopy()
        copyFileSync(backupFile, copy, constants.COPYFILE_EXCL)
      },
      catch: onCopy
    })
    const counts = yield* Effect.scoped(checkBackup(copy, backupFile)).pipe(Effect.mapError(onBackup))
    const { next, warning } = yield* Effect.scoped(Effect.gen(function*() {
      const replaced = yield* holdReplaced(store, options.idsMayRepeat)
      const next = yield* Effect.scoped(setIds(copy, replaced.handedOut)).pipe(Effect.mapError(onCopy))
      yield* Effect.try({
        try: () => {
          fsyncPath(copy)
          for (const suffix of companions) rmSync(`${target}${suffix}`, { force: true })
          renameSync(copy, target)
          interruption.line = `interrupted: ${target} was restored from ${backupFile}`
          fsyncPath(dirname(target))
        },
        catch: onCopy
      })
      return { next, warning: replaced.warning }
    }))
    const seconds = (performance.now() - startedAt) / 1000
    return {
      summary:
        `restored ${target} from ${backupFile} in ${seconds.toFixed(1)} s (integrity check ok; ${
          counts.join(", ")
        }); ` +
        `next ids ${next.join(", ")}, ${
          Option.isNone(warning) ? `above every id the replaced file handed out` : "the backup's own"
        }`,
      warning
    }
  }).pipe(Effect.onError(() =>
    Effect.sync(() => {
      try {
        removeCopy()
      } catch {
        // Nothing could be written there either.
      }
    })
  ))
}
