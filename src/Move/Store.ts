import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import { Context, Data, Effect, Layer, Predicate, Redacted, type Scope } from "effect"
import { closeSync, existsSync, openSync, readSync } from "node:fs"
import { sqliteFilename } from "../Config/AppConfig.js"
import { isPostgresUrl } from "../Sql/PostgresConnection.js"

/** A failure of the db command, as the one line it prints (never a password). */
export class MoveError extends Data.TaggedError("MoveError")<{ readonly message: string }> {}

/** A database the db command works on, named in `DATABASE_URL`'s forms. */
export type Store =
  | { readonly engine: "sqlite"; readonly filename: string; readonly label: string }
  | { readonly engine: "postgres"; readonly url: string; readonly label: string }

export const engineName = (store: Store) => (store.engine === "sqlite" ? "SQLite" : "PostgreSQL")

/**
 * The store a value names: a `postgres://` URL, or a SQLite path (bare, `sqlite:` or `file:`). Its
 * label is what messages show: the path, or the URL without its password.
 */
export const parseStore = (value: string, name: string): Effect.Effect<Store, MoveError> => {
  if (!isPostgresUrl(value)) {
    const filename = sqliteFilename(value)
    return filename.trim() === ""
      ? Effect.fail(new MoveError({ message: `${name}: names no SQLite file` }))
      : Effect.succeed({ engine: "sqlite", filename, label: filename })
  }
  try {
    const shown = new URL(value)
    shown.password = ""
    return Effect.succeed({ engine: "postgres", url: value, label: shown.href.replace(/:@/, "@") })
  } catch {
    // Quoting the value could show its password.
    return Effect.fail(
      new MoveError({ message: `${name}: is not a valid postgres:// URL (a password's reserved characters must be percent-encoded)` })
    )
  }
}

/** Every password a message could carry: the URL's and libpq's `PGPASSWORD`. */
const secretsOf = (store: Store): Array<string> => {
  const secrets = [process.env["PGPASSWORD"] ?? ""]
  if (store.engine === "postgres") {
    const password = new URL(store.url).password
    secrets.push(password)
    try {
      secrets.push(decodeURIComponent(password))
    } catch {
      // Left as written.
    }
  }
  return secrets.filter((secret) => secret.length > 0)
}

const reasonOf = (error: unknown): string => {
  const cause = Predicate.hasProperty(error, "cause") && error.cause !== undefined ? error.cause : error
  const message = cause instanceof Error ? cause.message : Predicate.hasProperty(cause, "message") ? String(cause.message) : String(cause)
  return message.split("\n")[0]!
}

/**
 * How long a command waits for another process's lock on a SQLite file: a serving instance holds
 * the write lock for one transaction at a time (milliseconds), so `read-only on` or a copy's
 * target waits its turn rather than fail. The wait is SQLite's own, inside the call: a command
 * has no other requests to serve meanwhile.
 */
const lockWaitMillis = 5_000

const hints: ReadonlyArray<readonly [RegExp, string]> = [
  [/not a database|malformed/i, "it is not a SQLite database, or it is damaged"],
  [/password authentication failed|no password was provided|SASL/i, "the user name or password is wrong"],
  [/ECONNREFUSED/i, "nothing listens there"],
  [/ENOTFOUND|EAI_AGAIN/i, "the host name is unknown"],
  [/timed? ?out/i, "it did not answer in time"],
  [/database is locked|SQLITE_BUSY/i, `another process held its lock for more than ${lockWaitMillis / 1000} s`],
  [/does not exist/i, "it does not exist"],
  [/terminat|connection error|not queryable|ECONNRESET|closed/i, "the connection was lost"]
]

/** One line for a driver's failure on a store: which store, what happened, the driver's words, never a password. */
export const describeStoreFailure = (store: Store, role: string, error: unknown): MoveError => {
  if (error instanceof MoveError) return error
  let reason = reasonOf(error)
  for (const secret of secretsOf(store)) reason = reason.replaceAll(secret, "***")
  const hint = hints.find(([pattern]) => pattern.test(reason))?.[1]
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
 * created when missing. A PostgreSQL connection waits at most 10 s to connect; `PGPASSWORD`,
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
            new MoveError({ message: `${options.role} SQLite database ${store.label} (it is not a SQLite database): file is not a database` })
          ))
      return Effect.zipRight(check, openSqlite(store.filename, options.mode, fail))
    }
    return openSqlite(store.filename, options.mode, fail)
  }
  return Layer.build(PgClient.layer({
    url: Redacted.make(store.url),
    maxConnections: 2,
    connectTimeout: "10 seconds",
    applicationName: "petstore db"
  })).pipe(
    Effect.map((context) => Context.get(context, SqlClient.SqlClient)),
    Effect.mapError(fail)
  )
}

const openSqlite = (filename: string, mode: "read" | "write" | "create", fail: (error: unknown) => MoveError) =>
  Layer.build(SqliteClient.layer({
    filename,
    readonly: mode === "read",
    readwrite: mode !== "read",
    create: mode === "create",
    // A source is never written, not even its journal mode.
    disableWAL: mode === "read"
  })).pipe(
    Effect.map((context) => Context.get(context, SqlClient.SqlClient)),
    Effect.tap((sql) => sql.unsafe(`PRAGMA busy_timeout = ${lockWaitMillis}`)),
    Effect.catchAllDefect(Effect.fail),
    Effect.mapError(fail)
  )
