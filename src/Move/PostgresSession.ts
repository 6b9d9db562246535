import { PgClient } from "@effect/sql-pg"
import { Effect, type Scope, Stream } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql"
import type { Connection } from "effect/sql/SqlConnection"
import {
  AuthenticationError,
  ConnectionError,
  SqlError,
  StatementTimeoutError,
  UnknownError
} from "effect/sql/SqlError"
import Pg from "pg"
import { Deadlines } from "./Deadlines.js"
import { libpqLogin } from "./Libpq.js"

/**
 * The db command's connection to a PostgreSQL store: one session on `pg`, the driver `COPY … FROM
 * STDIN` needs (`@effect/sql-pg` refuses COPY), seen as an `effect/sql` `SqlClient` with
 * `@effect/sql-pg`'s compiler, so that a copy's whole transaction runs on it. Every wait for the
 * server is bounded (`Deadlines`): one not answered in time, or given up, closes the session, and
 * every later use fails at once with the same reason, since a statement left running would hold
 * every later one (a `ROLLBACK` included); the server rolls back a session that ends.
 */
export interface PostgresSession {
  readonly sql: SqlClient.SqlClient
  /** The driver client, for COPY within the transaction `sql` has open. */
  readonly client: Pg.Client
  /** Waits, bounded as every statement is, for the answer to what `start` began on `client`. */
  readonly answer: <A>(start: (done: (outcome: Outcome<A>) => void) => void) => Effect.Effect<A, SqlError>
}

export type Outcome<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly error: unknown }

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

const noAnswer = (millis: number, variable: string, operation: string) => {
  const cause = Object.assign(new Error(`no answer within ${millis / 1000} s (${variable})`), { code: "ETIMEDOUT" })
  const props = { cause, message: cause.message, operation }
  return new SqlError({
    reason: operation === "connect" ? new ConnectionError(props) : new StatementTimeoutError(props)
  })
}

const gaveUp = "the session was closed: the command stopped waiting for it"
const abandoned = new SqlError({
  reason: new ConnectionError({ cause: new Error(gaveUp), message: gaveUp, operation: "execute" })
})

/**
 * The server processes of the sessions this command closed without the server's word, by URL: one
 * busy with a statement notices its session ended only when that is done, holding its locks till then.
 */
const abandonedBackends = new Map<string, Set<number>>()

/** Ends, on the server `url` names, the processes of the sessions this command closed there, so that their locks go now. */
export const endAbandoned = (sql: SqlClient.SqlClient, url: string) => {
  const pids = [...(abandonedBackends.get(url) ?? [])]
  return pids.length === 0
    ? Effect.void
    : Effect.asVoid(sql`SELECT pg_terminate_backend(pid) FROM unnest(${pids}::int[]) AS pid`)
}

/** How long a healthy server gets to acknowledge the end of a session before its socket is closed. */
const endMillis = 1_000

/** Opens the session: the URL's login completed from libpq's environment. */
export const openSession = (url: string): Effect.Effect<PostgresSession, SqlError, Scope.Scope> =>
  Effect.gen(function*() {
    const deadlines = yield* Deadlines
    const login = libpqLogin(url)
    const withLogin = new URL(url)
    if (login.username !== undefined) withLogin.username = encodeURIComponent(login.username)
    if (login.password !== undefined) withLogin.password = encodeURIComponent(login.password)
    const client = new Pg.Client({ connectionString: withLogin.href, application_name: "petstore db" })
    // A lost session's error is the statement's to report; unheard, it would stop the process.
    client.on("error", () => {})
    let closed: SqlError | undefined
    const close = (reason: SqlError) => {
      closed ??= reason
      // The pid the server gave at the start (BackendKeyData), which `pg` keeps but does not type.
      const pid = (client as unknown as { processID?: number }).processID
      if (pid !== undefined && pid !== null) {
        abandonedBackends.set(url, (abandonedBackends.get(url) ?? new Set()).add(pid))
      }
      client.connection.stream.destroy()
    }

    // Timers of their own rather than `Effect.timeout`: a `ROLLBACK` runs in a finalizer, where an
    // Effect timeout cannot interrupt the wait.
    const bounded = <A>(operation: "connect" | "execute", start: (done: (outcome: Outcome<A>) => void) => void) =>
      Effect.callback<A, SqlError>((resume) => {
        if (closed !== undefined) return resume(Effect.fail(closed))
        let waiting = true
        const finish = (effect: Effect.Effect<A, SqlError>) => {
          if (!waiting) return
          waiting = false
          clearTimeout(timer)
          resume(effect)
        }
        const [millis, variable] = operation === "connect"
          ? [deadlines.connectMillis, "DB_CONNECT_TIMEOUT_SECONDS"]
          : [deadlines.statementMillis, "DB_STATEMENT_TIMEOUT_SECONDS"]
        const timer = setTimeout(() => {
          close(noAnswer(millis, variable, operation))
          finish(Effect.fail(closed!))
        }, millis)
        start((outcome) =>
          finish(
            outcome.ok ? Effect.succeed(outcome.value) : Effect.fail(closed ?? pgFailure(outcome.error, operation))
          )
        )
        return Effect.sync(() => {
          if (!waiting) return
          waiting = false
          clearTimeout(timer)
          close(abandoned)
        })
      })
    const answer = <A>(start: (done: (outcome: Outcome<A>) => void) => void) => bounded("execute", start)
    const settle = <A>(promise: () => Promise<A>) => (done: (outcome: Outcome<A>) => void) =>
      void promise().then((value) => done({ ok: true, value }), (error) => done({ ok: false, error }))

    // Interruptible, unlike an acquisition's default: a connection given up on is closed at once (its socket destroyed).
    yield* Effect.acquireRelease(
      Effect.interruptible(bounded("connect", settle(() => client.connect()))),
      () =>
        Effect.callback<void>((resume) => {
          let timer: ReturnType<typeof setTimeout> | undefined
          const done = () => {
            clearTimeout(timer)
            client.connection.stream.destroy()
            resume(Effect.void)
          }
          if (closed !== undefined) return done()
          timer = setTimeout(done, endMillis)
          void client.end().finally(done)
        })
    )

    const query = <A>(config: Pg.QueryConfig | Pg.QueryArrayConfig) =>
      answer(settle(() => client.query(config as Pg.QueryConfig) as Promise<A>))
    const rows = (sql: string, params: ReadonlyArray<unknown>) =>
      Effect.map(query<Pg.QueryResult>({ text: sql, values: [...params] }), (result) => result.rows)
    const values = (sql: string, params: ReadonlyArray<unknown>) =>
      Effect.map(
        query<Pg.QueryArrayResult>({ text: sql, values: [...params], rowMode: "array" }),
        (result) => result.rows
      )
    const execute: Connection["execute"] = (sql, params, transform) =>
      transform === undefined ? rows(sql, params) : Effect.map(rows(sql, params), transform)
    const connection: Connection = {
      execute,
      executeRaw: (sql, params) => query({ text: sql, values: [...params] }),
      executeValues: values,
      executeValuesUnprepared: values,
      executeUnprepared: execute,
      executeStream: () => Stream.die(new Error("the db command's PostgreSQL session does not stream"))
    }
    const sql = yield* SqlClient.make({
      acquirer: Effect.succeed(connection),
      compiler: PgClient.makeCompiler(),
      driver: "pg",
      // A closed session's transaction is over: the server rolled it back when the session ended.
      isTransaction: () => closed === undefined,
      spanAttributes: [["db.system.name", "postgresql"]]
    }).pipe(Effect.provide(Reactivity.layer))
    return { sql, client, answer }
  })
