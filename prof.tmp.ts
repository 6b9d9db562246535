import { Effect, Layer, Context, Redacted } from "effect"
import { SqlClient, Migrator } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import { PgClient } from "@effect/sql-pg"
import { readPage, tables } from "./src/Move/Tables.ts"
import { writeRows } from "./src/Move/WriteRows.ts"
import { Checksum } from "./src/Move/Checksum.ts"
import { migrations } from "./src/Sql/Postgres.ts"
const pets = tables[0]!
const prog = Effect.gen(function*() {
  const ctx = yield* Layer.build(SqliteClient.layer({ filename: "/tmp/mv/src.db", readonly: true, readwrite: false, create: false, disableWAL: true }))
  const sql = Context.get(ctx, SqlClient.SqlClient)
  const ctx2 = yield* Layer.build(PgClient.layer({ url: Redacted.make("postgres://petstore@127.0.0.1:55432/w") }))
  const w = Context.get(ctx2, SqlClient.SqlClient)
  yield* Effect.provideService(Migrator.make({})({ loader: migrations }), SqlClient.SqlClient, w)
  let t = performance.now(); let after: any = undefined; const pages: any[] = []
  for (;;) { const rows = yield* readPage(sql, pets, after, 20000); pages.push(rows); if (rows.length < 20000) break; after = rows[rows.length-1] }
  console.log("read", performance.now() - t); t = performance.now()
  const c = new Checksum(); for (const p of pages) c.add(p)
  console.log("checksum", performance.now() - t); t = performance.now()
  yield* w.withTransaction(Effect.gen(function*() {
    yield* w`DROP INDEX pets_status_id`
    yield* Effect.forEach(pages, (p) => writeRows(w, pets, p))
    console.log("write", performance.now() - t); t = performance.now()
    yield* w`CREATE INDEX pets_status_id ON pets (status, id)`
    console.log("index", performance.now() - t); t = performance.now()
    let after: any = undefined; let n = 0
    for (;;) { const rows = yield* readPage(w, pets, after, 20000); n++; if (rows.length < 20000) break; after = rows[rows.length-1] }
    console.log("read pg", performance.now() - t); t = performance.now()
  }))
  console.log("commit", performance.now() - t); t = performance.now()
})
Effect.runPromise(Effect.scoped(prog) as any)
