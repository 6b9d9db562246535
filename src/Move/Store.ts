import { Data, Effect, Predicate, type Scope } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import type { SqlClient } from "effect/sql"
import { isSqlError } from "effect/sql/SqlError"
import { closeSync, existsSync, openSync, readSync } from "node:fs"
import { databaseUrlProblem, defaultDatabaseUrl, isPostgresUrl, sqliteFilename } from "../Config/AppConfig.js"
import * as SqliteClient from "../Sql/SqliteClient.js"
import { libpqLogin } from "./Libpq.js"
import { openSession } from "./PostgresSession.js"

/** A failure of the db command, as the one line it prints (never a password). */
export class MoveError extends Data.TaggedError("MoveError")<{ readonly message: string }> {}

/** A database the db command works on, named in `DATABASE_URL`'s forms. */
export type Store =
  | { readonly engine: "sqlite"; readonly filename: string; readonly label: string }
  | { readonly engine: "postgres"; readonly url: string; readonly label: string }

export const engineName = (store: Store) => (store.engine === "sqlite" ? "SQLite" : "PostgreSQL")

/**
 * A `postgres://` URL as messages show it: without its password. Where the userinfo ends is taken
 * from the last `@`, and when the userinfo holds a character that would end it early (a password's
 * unencoded `/`, `?`, `#` or `@`), none of it is shown: a wrong guess would show part of a password.
 */
export const withoutPassword = (value: string): string => {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(value)?.[0] ?? ""
  const rest = value.slice(scheme.length)
  const at = rest.lastIndexOf("@")
  if (at === -1) return value
  const userinfo = rest.slice(0, at)
  const user = userinfo.split(":")[0]!
  return /[/?#@]/.test(userinfo) || user === ""
    ? `${scheme}${rest.slice(at + 1)}`
    : `${scheme}${user}@${rest.slice(at + 1)}`
}

/** The password a `postgres://` URL holds, decoded; "" when none. */
export const passwordOf = (url: string): string => {
  const password = new URL(url).password
  try {
    return decodeURIComponent(password)
  } catch {
    return password
  }
}

/**
 * The store a value names: a `postgres://` URL, or a SQLite path (bare, `sqlite:` or `file:`),
 * refused as the service refuses it (`databaseUrlProblem`). Its label is what messages show: the
 * path, or the URL without its password.
 */
export const parseStore = (value: string, name: string): Effect.Effect<Store, MoveError> => {
  if (!isPostgresUrl(value) && sqliteFilename(value).trim() === "") {
    return Effect.fail(new MoveError({ message: `${name}: names no SQLite file` }))
  }
  const problem = databaseUrlProblem(value)
  if (problem !== undefined) return Effect.fail(new MoveError({ message: `${name}: ${problem}` }))
  return Effect.succeed(
    isPostgresUrl(value)
      ? { engine: "postgres", url: value, label: withoutPassword(value) }
      : { engine: "sqlite", filename: sqliteFilename(value), label: sqliteFilename(value) }
  )
}

/**
 * The store `DATABASE_URL` names when it is unset: not checked like a given one, its folder being
 * the one the service's first start makes (until then, the file is missing).
 */
export const defaultStore: Store = { engine: "sqlite", filename: defaultDatabaseUrl, label: defaultDatabaseUrl }

/** Every password a message could carry: the URL's, libpq's `PGPASSWORD` and the password file's. */
const secretsOf = (store: Store): Array<string> => {
  const secrets = [process.env["PGPASSWORD"] ?? ""]
  if (store.engine === "postgres") {
    secrets.push(new URL(store.url).password, passwordOf(store.url))
    const login = libpqLogin(store.url)
    if (login.password !== undefined) secrets.push(login.password)
  }
  return secrets.filter((secret) => secret.length > 0)
}

/** The driver's own failure inside a `SqlError` (or any error's cause): what its words and codes are read from. */
const driverCause = (error: unknown): unknown =>
  isSqlError(error)
    ? error.reason.cause
    : Predicate.hasProperty(error, "cause") && error.cause !== undefined
    ? error.cause
    : error

const wordsOf = (error: unknown): string => {
  const cause = driverCause(error)
  const message = cause instanceof Error
    ? cause.message
    : Predicate.hasProperty(cause, "message")
    ? String(cause.message)
    : String(cause)
  return message.split("\n")[0]!
}

/**
 * How long a command waits for another process's lock on a SQLite file: a serving instance holds
 * the write lock for one transaction at a time (milliseconds), so `read-only on` or a copy's
 * target waits its turn rather than fail.
 */
const lockWaitMillis = 5_000

/** What a code the driver gives (an errno, a SQLSTATE, a SQLite result code) means to an operator. */
const hintsByCode: Record<string, string> = {
  ECONNREFUSED: "nothing listens there",
  ENOENT: "no such file or folder",
  ENOTDIR: "a part of its path is not a folder",
  EROFS: "the file system is read-only",
  EACCES: "no permission to write there",
  EPERM: "no permission to write there",
  ENOSPC: "the disk is full",
  EDQUOT: "the disk quota is used up",
  ENOTFOUND: "the host name is unknown",
  EAI_AGAIN: "the host name is unknown",
  ETIMEDOUT: "it did not answer in time",
  ECONNRESET: "the connection was lost",
  EPIPE: "the connection was lost",
  "3D000": "it does not exist",
  "28P01": "the user name or password is wrong",
  "28000": "the user name or password is wrong",
  "57P01": "the connection was lost",
  "57P02": "the connection was lost",
  "57P03": "the connection was lost",
  SQLITE_NOTADB: "it is not a SQLite database, or it is damaged",
  SQLITE_FULL: "the disk is full",
  SQLITE_CANTOPEN: "it cannot be opened",
  SQLITE_READONLY: "it is read-only",
  SQLITE_CORRUPT: "it is not a SQLite database, or it is damaged"
}

/** What a failure means, from its code or else the kind of `SqlError` the driver classified it as. */
const hintOf = (error: unknown): string | undefined => {
  const cause = driverCause(error)
  const code = Predicate.hasProperty(cause, "code") ? String(cause.code) : undefined
  if (code !== undefined) {
    // An extended SQLite code (`SQLITE_CORRUPT_INDEX`) means what its primary code means.
    const hint = Object.entries(hintsByCode).find(([key]) => code === key || code.startsWith(`${key}_`))?.[1]
    if (hint !== undefined) return hint
    if (code.startsWith("08")) return "the connection was lost"
  }
  if (!isSqlError(error)) return undefined
  switch (error.reason._tag) {
    case "AuthenticationError":
      return "the user name or password is wrong"
    case "LockTimeoutError":
      return `another process held its lock for more than ${lockWaitMillis / 1000} s`
    case "StatementTimeoutError":
      return "it did not answer in time"
    case "ConnectionError":
      return error.reason.operation === "connect" ? undefined : "the connection was lost"
    default:
      return undefined
  }
}

/**
 * One line for a driver's failure on a store: which store, what happened, the driver's words,
 * never a password. Words that hold one are left out whole: a mark where it stood would show a
 * short one.
 */
export const describeStoreFailure = (store: Store, role: string, error: unknown): MoveError => {
  if (error instanceof MoveError) return error
  const words = wordsOf(error)
  const reason = secretsOf(store).some((secret) => words.includes(secret))
    ? "the driver's message is left out: it held the password"
    : words
  const hint = hintOf(error)
  return new MoveError({
    message: `${role} ${engineName(store)} database ${store.label}${hint === undefined ? "" : ` (${hint})`}: ${reason}`
  })
}

const firstBytes = (filename: string, length: number) => {
  const fd = openSync(filename, "r")
  try {
    const buffer = Buffer.alloc(length)
    return buffer.subarray(0, readSync(fd, buffer, 0, length, 0)).toString("latin1")
  } finally {
    closeSync(fd)
  }
}

/** The first bytes of every SQLite database file. */
const sqliteHeader = "SQLite format 3\0"

/**
 * An open connection to a store, as a plain `SqlClient` (a source and a target are open at once,
 * so neither is the context's). A SQLite source is opened read-only and must exist; a target is
 * created when missing. A PostgreSQL server is asked once at the open, so that a failure to
 * connect is told here; every wait for it is bounded (`PostgresSession.ts`); `PGPASSWORD`,
 * `PGUSER` and `~/.pgpass` apply as libpq's do when the URL leaves them out.
 */
export const connect = (
  store: Store,
  options: { readonly role: string; readonly mode: "read" | "write" | "create" }
): Effect.Effect<SqlClient.SqlClient, MoveError, Scope.Scope> => {
  const fail = (error: unknown) => describeStoreFailure(store, options.role, error)
  if (store.engine === "sqlite") {
    const exists = existsSync(store.filename)
    if (!exists && options.mode !== "create") {
      return Effect.fail(new MoveError({ message: `${options.role} SQLite database ${store.label}: no such file` }))
    }
    if (exists) {
      const header = Effect.try({ try: () => firstBytes(store.filename, 16), catch: fail })
      const check = Effect.flatMap(header, (header) =>
        header === sqliteHeader || header === ""
          ? Effect.void
          : Effect.fail(
            new MoveError({
              message:
                `${options.role} SQLite database ${store.label} (it is not a SQLite database): file is not a database`
            })
          ))
      return Effect.andThen(check, openSqlite(store.filename, options.mode, fail))
    }
    return openSqlite(store.filename, options.mode, fail)
  }
  return openSession(store.url).pipe(
    Effect.map(({ sql }) => sql),
    Effect.tap((sql) => sql`SELECT 1`),
    Effect.mapError(fail)
  )
}

const openSqlite = (filename: string, mode: "read" | "write" | "create", fail: (error: unknown) => MoveError) =>
  SqliteClient.make({
    filename,
    readonly: mode === "read",
    readwrite: mode !== "read",
    create: mode === "create",
    // A source is never written, not even its journal mode.
    disableWAL: mode === "read",
    lockWait: lockWaitMillis
  }).pipe(
    Effect.catchDefect(Effect.fail),
    Effect.mapError(fail),
    Effect.provide(Reactivity.layer)
  )
