import { SqlClient } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Statement } from "@effect/sql"
import { Context, Effect, Effectable, FiberRef } from "effect"

/**
 * A statement that runs straight on the connection when no span is wanted: `@effect/sql` runs
 * each statement in a span and a scope of its own and acquires its connection through the
 * context, some 20 µs of CPU where a SQLite statement costs about 5. Inside a transaction it runs
 * on the transaction's connection; with tracing on, as `@effect/sql` runs it, in its span.
 */
class DirectStatement<A> extends Effectable.Class<ReadonlyArray<A>, SqlError> implements Statement.Statement<A> {
  constructor(readonly statement: Statement.Statement<A>, readonly connection: Connection) {
    super()
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
    return Effect.withFiberRuntime((fiber) => {
      if (fiber.getFiberRef(FiberRef.currentTracerEnabled)) return this.statement
      const [sql, params] = this.statement.compile()
      const transaction = Context.getOption(fiber.currentContext, SqlClient.TransactionConnection)
      const connection = transaction._tag === "Some" ? transaction.value[0] : this.connection
      return connection.execute(sql, params, undefined) as Effect.Effect<ReadonlyArray<A>, SqlError>
    })
  }
}

/**
 * `client`, its statements run by `DirectStatement` on `connection` outside transactions. For a
 * client whose rows need no transform (none is configured here).
 */
export const withDirectStatements = (client: SqlClient.SqlClient, connection: Connection): SqlClient.SqlClient => {
  const direct = Object.assign(
    function sql(strings: unknown, ...args: Array<unknown>): unknown {
      const made = (client as any)(strings, ...args)
      return Effect.isEffect(made) ? new DirectStatement(made as Statement.Statement<any>, connection) : made
    },
    client,
    {
      unsafe: (sql: string, params?: ReadonlyArray<unknown>) => new DirectStatement(client.unsafe(sql, params), connection)
    }
  )
  ;(direct as any).safe = direct
  return direct as unknown as SqlClient.SqlClient
}
