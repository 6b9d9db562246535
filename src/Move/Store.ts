import { Data, Effect, Predicate, type Scope } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import type { SqlClient } from "effect/sql"
import { isSqlError } from "effect/sql/SqlError"
import { existsSync, rmSync } from "node:fs"
import { databaseUrlProblem, defaultDatabaseUrl, isPostgresUrl, sqliteFilename } from "../Config/AppConfig.js"
import { decode } from "../Sql/PostgresConnection.js"
import * as SqliteClient from "../Sql/SqliteClient.js"
import { passwordFileLogin } from "./Libpq.js"
import { openSession } from "./PostgresSession.js"

/** A failure of the db command, as the one line it prints (never a password). */
export class MoveError extends Data.TaggedError("MoveError")<{ readonly message: string }> {}

/** A database the db command works on, named in `DATABASE_URL`'s forms; its label is what messages show. */
export type Store =
  | { readonly engine: "sqlite"; readonly filename: string; readonly label: string }
  | { readonly engine: "postgres"; readonly url: string; readonly label: string }

export const engineName = (store: Store) => (store.engine === "sqlite" ? "SQLite" : "PostgreSQL")

/** The line the db command prints when a signal stops it, kept true as the command goes. */
export const interruption = { line: "interrupted: nothing was left half-done (a copy's target is as it was before)" }

/** A `postgres://` URL without its password; a userinfo that could end early is left out whole, not guessed at. */
export const withoutPassword = (value: string): string =>
  value.replace(/^([a-z][a-z0-9+.-]*:\/\/)?(.*)@/is, (_, scheme: string | undefined, userinfo: string) => {
    const user = userinfo.split(":")[0]!
    return `${scheme ?? ""}${/[/?#@]/.test(userinfo) || user === "" ? "" : `${user}@`}`
  })

export const passwordOf = (url: string): string => decode(new URL(url).password)

/** The store a value names, refused as the service refuses it (`databaseUrlProblem`). */
export const parseStore = (value: string, name: string): Effect.Effect<Store, MoveError> => {
  const problem = !isPostgresUrl(value) && sqliteFilename(value).trim() === ""
    ? "names no SQLite file"
    : databaseUrlProblem(value)
  if (problem !== undefined) return Effect.fail(new MoveError({ message: `${name}: ${problem}` }))
  return Effect.succeed(
    isPostgresUrl(value)
      ? { engine: "postgres", url: value, label: withoutPassword(value) }
      : { engine: "sqlite", filename: sqliteFilename(value), label: sqliteFilename(value) }
  )
}

/** The store when `DATABASE_URL` is unset: not checked, its folder being the one the service's first start makes. */
export const defaultStore: Store = { engine: "sqlite", filename: defaultDatabaseUrl, label: defaultDatabaseUrl }

/** The driver's own failure inside a `SqlError` (or any error's cause): what its words and codes are read from. */
const driverCause = (error: unknown): unknown =>
  isSqlError(error)
    ? error.reason.cause
    : Predicate.hasProperty(error, "cause") && error.cause !== undefined
    ? error.cause
    : error

export const codeOf = (error: unknown): string => {
  const cause = driverCause(error)
  return Predicate.hasProperty(cause, "code") ? String(cause.code) : ""
}

/** How long a command waits for a serving instance's lock on a SQLite file, held for one transaction at a time. */
const lockWaitMillis = 5_000

/** What a driver's code or effect/sql's reason means to an operator; `SQLITE_CORRUPT_INDEX` as `SQLITE_CORRUPT`. */
const hintsByCode: ReadonlyArray<readonly [string, string]> = [
  ["ECONNREFUSED", "nothing listens there"],
  ["ENOENT", "no such file or folder"],
  ["ENOTDIR", "a part of its path is not a folder"],
  ["EROFS", "the file system is read-only"],
  ["EACCES EPERM", "no permission to write there"],
  ["ENOSPC SQLITE_FULL", "the disk is full"],
  ["EDQUOT", "the disk quota is used up"],
  ["ENOTFOUND EAI_AGAIN", "the host name is unknown"],
  ["ETIMEDOUT StatementTimeoutError", "it did not answer in time"],
  ["ECONNRESET EPIPE 57P01 57P02 57P03", "the connection was lost"],
  ["3D000", "it does not exist"],
  ["28P01 28000 AuthenticationError", "the user name or password is wrong"],
  ["SQLITE_NOTADB SQLITE_CORRUPT", "it is not a SQLite database, or it is damaged"],
  ["SQLITE_CANTOPEN", "it cannot be opened"],
  ["SQLITE_READONLY", "it is read-only"],
  ["LockTimeoutError", `another process held its lock for more than ${lockWaitMillis / 1000} s`]
]

const hintOf = (error: unknown): string | undefined => {
  const [code, reason] = [codeOf(error), isSqlError(error) ? error.reason : undefined]
  const matches = (key: string) => key === reason?._tag || code === key || code.startsWith(`${key}_`)
  const hint = hintsByCode.find(([keys]) => keys.split(" ").some(matches))
  if (hint !== undefined) return hint[1]
  const lost = code.startsWith("08") || (reason?._tag === "ConnectionError" && reason.operation !== "connect")
  return lost ? "the connection was lost" : undefined
}

/** One line for a driver's failure on a store; words holding a password are left out whole (a mark would show its length). */
export const describeStoreFailure = (store: Store, role: string, error: unknown): MoveError => {
  if (error instanceof MoveError) return error
  const cause = driverCause(error)
  const words = String(Predicate.hasProperty(cause, "message") ? cause.message : cause).split("\n")[0]!
  const secrets = [process.env["PGPASSWORD"] ?? ""]
  if (store.engine === "postgres") {
    secrets.push(new URL(store.url).password, passwordOf(store.url), passwordFileLogin(store.url) ?? "")
  }
  const reason = secrets.some((secret) => secret !== "" && words.includes(secret))
    ? "the driver's message is left out: it held the password"
    : words
  const hint = hintOf(error)
  return new MoveError({
    message: `${role} ${engineName(store)} database ${store.label}${hint === undefined ? "" : ` (${hint})`}: ${reason}`
  })
}

export const failingAs = (store: Store, role: string) =>
  Effect.mapError((error: unknown) => describeStoreFailure(store, role, error))

/** A store opened as a `SqlClient`: a SQLite source never written, not even its journal mode; PostgreSQL asked once. */
export const connect = (
  store: Store,
  { mode, role }: { readonly role: string; readonly mode: "read" | "write" | "create" }
): Effect.Effect<SqlClient.SqlClient, MoveError, Scope.Scope> => {
  if (store.engine === "postgres") {
    return openSession(store.url).pipe(
      Effect.flatMap(({ sql }) => Effect.as(sql`SELECT 1`, sql)),
      failingAs(store, role)
    )
  }
  if (mode !== "create" && !existsSync(store.filename)) {
    return Effect.fail(new MoveError({ message: `${role} SQLite database ${store.label}: no such file` }))
  }
  return openSqlite({
    filename: store.filename,
    readonly: mode === "read",
    create: mode === "create",
    disableWAL: mode === "read",
    lockWait: lockWaitMillis
  }).pipe(failingAs(store, role))
}

export const onStore = <A, E>(
  store: Store,
  mode: "read" | "write",
  work: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>
) => Effect.flatMap(connect(store, { role: "the", mode }), work).pipe(failingAs(store, "the"), Effect.scoped)

/** SQLite's files beside a database: a file put under its name must find none, or it takes them as its own. */
export const companions = ["-wal", "-shm", "-journal"]

export const removeWithCompanions = (file: string) => {
  // Checked first: Bun's rmSync fails on a path through a file (EFAULT) even with `force`.
  for (const path of ["", ...companions].map((suffix) => `${file}${suffix}`)) if (existsSync(path)) rmSync(path)
}

export const openSqlite = (options: SqliteClient.SqliteClientConfig) =>
  SqliteClient.make(options).pipe(Effect.catchDefect(Effect.fail), Effect.provide(Reactivity.layer))
