import { Effect, Layer, Context, Redacted, Option } from "effect"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { copyIn } from "./src/Move/CopyIn.ts"
const prog = Effect.gen(function*() {
  const ctx2 = yield* Layer.build(PgClient.layer({ url: Redacted.make("postgres://petstore@127.0.0.1:55432/w2") }))
  const w = Context.get(ctx2, SqlClient.SqlClient)
  yield* w.withTransaction(Effect.gen(function*() {
    const conn = Option.getOrThrow(yield* Effect.serviceOption(SqlClient.TransactionConnection))
    console.log("pg?", typeof (conn[0] as any).pg, (conn[0] as any).pg?.activeQuery, (conn[0] as any).pg?.queryQueue?.length)
    const c = yield* copyIn((conn[0] as any).pg, { name: "t", columns: [{ name: "a", kind: "integer" }, { name: "b", kind: "text" }], keyLength: 1 })
    console.log("opened")
    yield* c.write([["1", "x"], ["2", null]])
    console.log("written")
    yield* c.end
    console.log("ended")
    console.log(yield* w`SELECT count(*) FROM t`)
  }))
})
Effect.runPromise(Effect.scoped(prog) as any).then(() => process.exit(0))
setTimeout(() => { console.log("timeout"); process.exit(1) }, 5000)
