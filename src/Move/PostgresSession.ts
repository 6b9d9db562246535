import { PgClient } from "@effect/sql-pg"
import { Config, Context, Effect, identity, Schema, type Scope, Stream } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql"
import type { Connection } from "effect/sql/SqlConnection"
import {
  AuthenticationError,
  ConnectionError,
  type SqlError,
  StatementTimeoutError,
  UnknownError
} from "effect/sql/SqlError"
import Pg from "pg"
import { connectionError, sqlError } from "../Sql/DatabaseErrors.js"
import { passwordFileLogin } from "./Libpq.js"

/** How long the db command waits for PostgreSQL to connect and to answer, rather than as long as a silent socket stays open. */
const defaults = { connectMillis: 10_000, statementMillis: 20_000 }

export const Deadlines = Context.Reference("petstore/Move/Deadlines", { defaultValue: () => defaults })

const seconds = (name: string, defaultMillis: number) =>
  Config.schema(
    Schema.NumberFromString.check(
      Schema.makeFilter((n: number) => (n > 0 && n <= 3600) || "must be a number of seconds above 0, at most 3600")
    ),
    name
  ).pipe(Config.map((n) => Math.round(n * 1000)), Config.withDefault(defaultMillis))

export const deadlinesConfig: Config.Config<typeof defaults> = Config.all({
  connectMillis: seconds("DB_CONNECT_TIMEOUT_SECONDS", defaults.connectMillis),
  statementMillis: seconds("DB_STATEMENT_TIMEOUT_SECONDS", defaults.statementMillis)
})

/** A failure of `pg` classified as `effect/sql` does: by SQLSTATE, a failure with none being the connection's own. */
export const pgFailure = (cause: unknown, operation: string): SqlError => {
  const code = cause instanceof Error && "code" in cause && typeof cause.code === "string" ? cause.code : undefined
  const Reason = code === undefined || code.startsWith("08") || code.startsWith("57P0")
    ? ConnectionError
    : code.startsWith("28")
    ? AuthenticationError
    : UnknownError
  return sqlError(Reason, cause instanceof Error ? cause.message : String(cause), operation, cause)
}

const noAnswer = (millis: number, variable: string, operation: string) => {
  const cause = Object.assign(new Error(`no answer within ${millis / 1000} s (${variable})`), { code: "ETIMEDOUT" })
  return sqlError(operation === "connect" ? ConnectionError : StatementTimeoutError, cause.message, operation, cause)
}

const abandoned = connectionError("the session was closed: the command stopped waiting for it", "execute")

/** The server processes of the sessions closed here, by URL: a busy one holds its locks till its statement ends. */
const abandonedBackends = new Map<string, Set<number>>()

/** Ends the processes of the sessions this command closed on the server `url` names, so that their locks go now. */
export const endAbandoned = (sql: SqlClient.SqlClient, url: string) => {
  const pids = [...(abandonedBackends.get(url) ?? [])]
  return pids.length === 0
    ? Effect.void
    : Effect.asVoid(sql`SELECT pg_terminate_backend(pid) FROM unnest(${pids}::int[]) AS pid`)
}

/** How long a healthy server gets to acknowledge the end of a session before its socket is closed. */
const endMillis = 1_000

/** `sql` on one session of `pg`, whose `client` COPY runs on and whose `answer` bounds a wait for what it began. */
export type PostgresSession = Effect.Success<ReturnType<typeof openSession>>

// The login completed from libpq's environment (`Libpq.ts`). A wait past its deadline, or given up, closes the
// session and fails every later use: a statement left running would hold every later one.
export const openSession = (url: string) =>
  Effect.gen(function*() {
    const deadlines = yield* Deadlines
    const withLogin = new URL(url)
    const password = passwordFileLogin(url)
    if (password !== undefined) withLogin.password = encodeURIComponent(password)
    const client = new Pg.Client({ connectionString: withLogin.href, application_name: "petstore db" })
    // A lost session's error is the statement's to report; unheard, it would stop the process.
    client.on("error", () => {})
    let closed: SqlError | undefined
    const close = (reason: SqlError) => {
      closed ??= reason
      // The pid the server gave at the start (BackendKeyData), which `pg` keeps but does not type.
      const pid = (client as unknown as { processID?: number | null }).processID
      if (pid != null) abandonedBackends.set(url, (abandonedBackends.get(url) ?? new Set()).add(pid))
      client.connection.stream.destroy()
    }
    // Own timers, not `Effect.timeout`: a `ROLLBACK` runs in a finalizer, which an Effect timeout cannot interrupt.
    const bounded = <A>(operation: "connect" | "execute", start: () => Promise<A>) =>
      Effect.callback<A, SqlError>((resume) => {
        if (closed !== undefined) return resume(Effect.fail(closed))
        const [millis, variable] = operation === "connect"
          ? [deadlines.connectMillis, "DB_CONNECT_TIMEOUT_SECONDS"]
          : [deadlines.statementMillis, "DB_STATEMENT_TIMEOUT_SECONDS"]
        const timer = setTimeout(() => {
          close(noAnswer(millis, variable, operation))
          resume(Effect.fail(closed!))
        }, millis)
        // `resume` takes the first of the timer, the answer and an interruption (which comes only while waiting).
        start().then(
          (value) => resume(Effect.succeed(value)),
          (error) => resume(Effect.fail(closed ?? pgFailure(error, operation)))
        ).finally(() => clearTimeout(timer))
        return Effect.sync(() => {
          clearTimeout(timer)
          close(abandoned)
        })
      })
    const answer = <A>(start: () => Promise<A>) => bounded("execute", start)
    // Interruptible, unlike an acquisition's default: a connection given up on is closed at once.
    yield* Effect.acquireRelease(
      Effect.interruptible(bounded("connect", () => client.connect())),
      () =>
        Effect.callback<void>((resume) => {
          const done = () => {
            clearTimeout(timer)
            client.connection.stream.destroy()
            resume(Effect.void)
          }
          const timer = closed === undefined ? setTimeout(done, endMillis) : undefined
          if (closed === undefined) void client.end().finally(done)
          else done()
        })
    )
    const query = (text: string, params: ReadonlyArray<unknown>, rowMode?: "array") =>
      answer(() => client.query({ text, values: [...params], rowMode } as Pg.QueryConfig))
    const execute: Connection["execute"] = (text, params, transform = identity) =>
      Effect.map(query(text, params), (result) => transform(result.rows))
    const values = (text: string, params: ReadonlyArray<unknown>) =>
      Effect.map(query(text, params, "array"), (result) => result.rows)
    const connection: Connection = {
      execute,
      executeRaw: query,
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
  }) satisfies Effect.Effect<unknown, SqlError, Scope.Scope>
