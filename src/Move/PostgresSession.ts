import { PgClient } from "@effect/sql-pg"
import { Effect, type Scope, Stream } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql"
import type { Connection } from "effect/sql/SqlConnection"
import { AuthenticationError, ConnectionError, SqlError, UnknownError } from "effect/sql/SqlError"
import Pg from "pg"
import { libpqLogin } from "./Libpq.js"
import { connectTimeoutMillis } from "./Store.js"

/**
 * A copy's target on PostgreSQL: one session on `pg`, the driver `COPY … FROM STDIN` needs
 * (`@effect/sql-pg` refuses COPY), seen by the rest of the copy as an `effect/sql` `SqlClient`
 * with `@effect/sql-pg`'s own compiler. The copy's transaction holds its tables' rows, their
 * indexes, sequences and checks, so all of it runs on that one session.
 */
export interface PostgresSession {
  readonly sql: SqlClient.SqlClient
  /** The session's driver client, for COPY within the transaction `sql` has open. */
  readonly client: Pg.Client
}

/** A failure of `pg` classified as `effect/sql` does: by SQLSTATE, a failure with none being the connection's own. */
export const pgFailure = (cause: unknown, operation: string): SqlError => {
  const code = cause instanceof Error && "code" in cause && typeof cause.code === "string" ? cause.code : undefined
  const props = { cause, message: cause instanceof Error ? cause.message : String(cause), operation }
  return new SqlError({
    reason: code === undefined || code.startsWith("08") || code.startsWith("57P0")
      ? new ConnectionError(props)
      : code.startsWith("28")
      ? new AuthenticationError(props)
      : new UnknownError(props)
  })
}

const query = <A>(client: Pg.Client, config: Pg.QueryConfig | Pg.QueryArrayConfig) =>
  Effect.tryPromise({
    try: () => client.query(config as Pg.QueryConfig) as Promise<Pg.QueryResult<any>>,
    catch: (cause) => pgFailure(cause, "execute")
  }).pipe(Effect.map((result): A => result as A))

/** Opens the session: the URL's login completed from libpq's environment, 10 s to connect. */
export const openSession = (url: string): Effect.Effect<PostgresSession, SqlError, Scope.Scope> =>
  Effect.gen(function*() {
    const login = libpqLogin(url)
    const withLogin = new URL(url)
    if (login.username !== undefined) withLogin.username = encodeURIComponent(login.username)
    if (login.password !== undefined) withLogin.password = encodeURIComponent(login.password)
    const client = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          const client = new Pg.Client({
            connectionString: withLogin.href,
            connectionTimeoutMillis: connectTimeoutMillis,
            application_name: "petstore db"
          })
          // A lost session's error is the statement's to report; unheard, it would stop the process.
          client.on("error", () => {})
          await client.connect()
          return client
        },
        catch: (cause) => pgFailure(cause, "connect")
      }),
      (client) => Effect.promise(() => client.end().catch(() => undefined))
    )
    const rows = (sql: string, params: ReadonlyArray<unknown>) =>
      Effect.map(query<Pg.QueryResult>(client, { text: sql, values: [...params] }), (result) => result.rows)
    const values = (sql: string, params: ReadonlyArray<unknown>) =>
      Effect.map(
        query<Pg.QueryArrayResult>(client, { text: sql, values: [...params], rowMode: "array" }),
        (result) => result.rows
      )
    const connection: Connection = {
      execute: (sql, params, transform) => transform === undefined ? rows(sql, params) : Effect.map(rows(sql, params), transform),
      executeRaw: (sql, params) => query(client, { text: sql, values: [...params] }),
      executeValues: values,
      executeValuesUnprepared: values,
      executeUnprepared: (sql, params, transform) =>
        transform === undefined ? rows(sql, params) : Effect.map(rows(sql, params), transform),
      executeStream: () => Stream.die(new Error("the copy's PostgreSQL session does not stream"))
    }
    const sql = yield* SqlClient.make({
      acquirer: Effect.succeed(connection),
      compiler: PgClient.makeCompiler(),
      driver: "pg",
      spanAttributes: [["db.system.name", "postgresql"]]
    }).pipe(Effect.provide(Reactivity.layer))
    return { sql, client }
  })
