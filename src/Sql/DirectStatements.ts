import { Context, Effect } from "effect"
import type { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"

/** `Effect.map(sql.unsafe(text, params), f)`, or the same past effect/sql's statement. */
export type Run = <A>(sql: string, params: ReadonlyArray<unknown>, f: (rows: Rows) => A) => Effect.Effect<A, SqlError>
type Rows = ReadonlyArray<Record<string, unknown>>

/**
 * A statement through `runDirect`, which both engines' clients carry: on a connection, past effect/sql's statement
 * (its compile, span, acquisition; [benchmarks](../../docs/benchmarks.md#where-the-time-goes)), outside a transaction.
 */
export const directStatementsOf = (sql: SqlClient.SqlClient & { readonly runDirect?: Run }): Run => {
  // In a transaction, and on a client made elsewhere (a test's `PgClient`), effect/sql's statement.
  const statement: Run = (text, params, f) => Effect.map(sql.unsafe<Record<string, unknown>>(text, params), f)
  const { runDirect = statement } = sql
  return (text, params, f) =>
    Effect.withFiber((fiber) => {
      const outside = Context.getOrUndefined(fiber.context, sql.transactionService) === undefined
      return (outside ? runDirect : statement)(text, params, f)
    })
}
