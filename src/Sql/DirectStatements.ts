import { SqlClient, Statement } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Effectable, type Fiber, Option, Predicate } from "effect"
import { statementSummary } from "../Observability/Metrics.js"
import { inChildSpan } from "../Observability/Tracing.js"
import { type Compiled, makeCallSiteCompiler } from "./CallSites.js"
import type { DatabaseSystem } from "./StatementTiming.js"
import { cachedByText } from "./TextCache.js"

/** How a statement outside a transaction is run: its text and parameters on the engine's connection. */
export interface Outside {
  readonly run: (sql: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<any>, SqlError>
  /** The same with its rows made into `f`'s value and a failure made a defect in the statement's own last step, where the engine can. */
  readonly mapRowsOrDie?: <B>(sql: string, params: ReadonlyArray<unknown>, f: (rows: ReadonlyArray<any>) => B) => Effect.Effect<B>
}

type Span = readonly [name: string, attributes: Readonly<Record<string, unknown>>]

/** A statement's span: named by its operation and table, with its text (placeholders, never values). */
const spanOf = (system: DatabaseSystem, sql: string): Span => {
  const { operation, table } = statementSummary(sql)
  const summary = table === undefined ? operation : `${operation} ${table}`
  return [summary, {
    "db.system": system,
    "db.system.name": system,
    "db.operation.name": operation,
    ...(table === undefined ? {} : { "db.collection.name": table }),
    "db.query.summary": summary,
    "db.query.text": sql
  }]
}

/** How one client's statements are made, compiled, run outside a transaction and spanned. */
interface StatementSource {
  readonly build: (strings: TemplateStringsArray, args: ReadonlyArray<unknown>) => Statement.Statement<unknown>
  readonly compile: (strings: TemplateStringsArray, args: ReadonlyArray<unknown>) => Compiled
  readonly outside: Outside
  readonly spanOf: (sql: string) => Span
}

/**
 * A statement run straight on its connection. `@effect/sql`'s own statement runs in a span and a
 * scope of its own, compiles its fragments each time and finds its connection through the
 * context: on SQLite several times the statement's own work, on PostgreSQL a third of a one-row
 * read's CPU on the service's side, network included (60 against 40 µs per read:
 * `scripts/bench/statements.ts`). Here its text comes from its call site (`CallSites.ts`), and the
 * library's own statement is built only when asked for (`raw`, `stream`, …). Inside a
 * transaction it runs on the transaction's connection, which `withTransaction` put in the
 * context. In a sampled trace it has a child span of its own.
 */
class DirectStatement<A> extends Effectable.Class<ReadonlyArray<A>, SqlError> implements Statement.Statement<A> {
  constructor(
    private readonly source: StatementSource,
    private readonly strings: TemplateStringsArray | undefined,
    private readonly args: ReadonlyArray<unknown>,
    private built?: Statement.Statement<A>
  ) {
    super()
  }
  get statement(): Statement.Statement<A> {
    return this.built ??= this.source.build(this.strings!, this.args) as Statement.Statement<A>
  }
  get [Statement.FragmentId]() {
    return this.statement[Statement.FragmentId]
  }
  get segments() {
    return this.statement.segments
  }
  get raw() {
    return this.statement.raw
  }
  get withoutTransform() {
    return this.statement.withoutTransform
  }
  get stream() {
    return this.statement.stream
  }
  get values() {
    return this.statement.values
  }
  get unprepared() {
    return this.statement.unprepared
  }
  compile(withoutTransform?: boolean | undefined) {
    return this.statement.compile(withoutTransform)
  }
  commit(): Effect.Effect<ReadonlyArray<A>, SqlError> {
    return Effect.withFiberRuntime((fiber) => this.runIn(fiber))
  }
  /** The rows made into `f`'s value, a failure being a defect (`rowsOrDie`). */
  mapRowsOrDie<B>(f: (rows: ReadonlyArray<A>) => B): Effect.Effect<B> {
    return Effect.withFiberRuntime((fiber) => {
      const mapOutside = this.source.outside.mapRowsOrDie
      // The common case, outside a transaction and with no span: mapped in the statement's own last step.
      if (
        mapOutside !== undefined && fiber.currentSpan?.sampled !== true &&
        !Context.getOption(fiber.currentContext, SqlClient.TransactionConnection).pipe(Option.isSome)
      ) {
        const [sql, params] = this.compiled()
        return mapOutside(sql, params, f)
      }
      return matchRowsOrDie(this.runIn(fiber), f)
    })
  }
  private compiled(): Compiled {
    return this.built === undefined ? this.source.compile(this.strings!, this.args) : this.built.compile()
  }
  private runIn(fiber: Fiber.RuntimeFiber<unknown, unknown>): Effect.Effect<ReadonlyArray<A>, SqlError> {
    const [sql, params] = this.compiled()
    const transaction = Context.getOption(fiber.currentContext, SqlClient.TransactionConnection)
    const run = transaction._tag === "Some"
      ? transaction.value[0].execute(sql, params, undefined)
      : this.source.outside.run(sql, params)
    // Outside a request, or in a trace not sampled: a span would only cost.
    const parent = fiber.currentSpan
    if (parent?.sampled !== true) return run
    const [name, attributes] = this.source.spanOf(sql)
    return inChildSpan(fiber.currentTracer, parent, name, "client", attributes, run)
  }
}

const matchRowsOrDie = <A, B>(statement: Effect.Effect<ReadonlyArray<A>, SqlError>, f: (rows: ReadonlyArray<A>) => B) =>
  Effect.matchEffect(statement, { onFailure: Effect.die, onSuccess: (rows) => Effect.succeed(f(rows)) })

/**
 * A statement's rows made into its caller's value, a failing statement being a defect (nothing a
 * caller could handle), and `f` throwing too. One step of the fiber where
 * `Effect.orDie(Effect.map(statement, f))` takes four; for a statement of the service's clients
 * outside a transaction, done in the statement's own last step (on SQLite, where each step costs
 * about as much as a small read's own work).
 */
export const rowsOrDie = <A, B>(
  statement: Effect.Effect<ReadonlyArray<A>, SqlError>,
  f: (rows: ReadonlyArray<A>) => B
): Effect.Effect<B> => statement instanceof DirectStatement ? statement.mapRowsOrDie(f) : matchRowsOrDie(statement, f)

/**
 * `client` with its template statements (`` sql`…` ``) and `sql.unsafe` run as `DirectStatement`s,
 * outside a transaction through `outside`. The library's helpers (`literal`, `in`,
 * `withTransaction`, …) are the client's own; rows are used as the driver gives them (no
 * transform is configured).
 */
export const makeDirectClient = <Client extends SqlClient.SqlClient>(
  client: Client,
  system: DatabaseSystem,
  outside: Outside
): Client => {
  const build = (strings: TemplateStringsArray, args: ReadonlyArray<unknown>) =>
    Reflect.apply(client, undefined, [strings, ...args]) as Statement.Statement<unknown>
  const source: StatementSource = {
    build,
    compile: makeCallSiteCompiler((strings, args) => build(strings, args).compile()),
    outside,
    spanOf: cachedByText((sql) => spanOf(system, sql))
  }
  const direct = Object.assign(
    function sql(strings: unknown, ...args: Array<unknown>): unknown {
      // `sql("name")` is an identifier, not a statement.
      return Array.isArray(strings) && "raw" in strings
        ? new DirectStatement(source, strings as unknown as TemplateStringsArray, args)
        : Reflect.apply(client, undefined, [strings, ...args])
    },
    client,
    {
      unsafe: (sql: string, params?: ReadonlyArray<unknown>) =>
        new DirectStatement(source, undefined, [], client.unsafe(sql, params))
    }
  )
  // Only the template's statements differ, which its call signatures cannot say of a plain function.
  return Object.assign(direct, { safe: direct }) as unknown as Client
}

/**
 * The connection `client`'s own statements run on outside a transaction. `@effect/sql-pg` holds
 * one such connection, which takes a pooled connection for each statement's run (and cancels the
 * statement on the server when it is interrupted), but exposes it only as its statements'
 * `acquirer`: read from one here, outside any transaction, when the client is built.
 */
export const connectionOutsideTransactions = (client: SqlClient.SqlClient): Effect.Effect<Connection, SqlError> => {
  const statement: object = client`SELECT 1`
  return Predicate.hasProperty(statement, "acquirer") && Effect.isEffect(statement.acquirer)
    ? Effect.scoped(statement.acquirer as Connection.Acquirer)
    : Effect.dieMessage("@effect/sql's statements no longer carry their connection's acquirer")
}
