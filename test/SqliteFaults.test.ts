import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { Cause, Context, Duration, Effect, Exit, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { isSqlError } from "effect/sql/SqlError"
import { copyFileSync, renameSync, rmSync } from "node:fs"
import { open } from "node:fs/promises"
import { join } from "node:path"
import { AppConfig } from "../src/Config/AppConfig.js"
import { toUnavailable } from "../src/Sql/DatabaseErrors.js"
import { SqliteConnection } from "../src/Sql/SqliteConnection.js"
import { createKey, runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

// Short, so that the bound is seen without waiting out the production default (3 s).
const lockWaitSeconds = 1

const timed = async (request: Promise<Response>) => {
  const startedAt = performance.now()
  const response = await request
  const body = await response.text()
  return { status: response.status, headers: response.headers, body, millis: performance.now() - startedAt }
}

/** A server on a SQLite file of its own, with a key, and a way to create pets. */
const serverOnSqlite = async (folder: string, env: Record<string, string> = {}) => {
  const path = join(folder, "petstore.db")
  const all = { DATABASE_URL: path, DATABASE_STATEMENT_TIMEOUT_SECONDS: String(lockWaitSeconds), ...env }
  const key = await createKey(all, "faults")
  const server = await startServer(all)
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
  return {
    path,
    server,
    headers,
    create: (name: string, extra: Record<string, string> = {}) =>
      timed(
        fetch(`${server.url}/v1/pets`, {
          method: "POST",
          headers: { ...headers, ...extra },
          body: JSON.stringify({ name, categoryId: 1 })
        })
      ),
    list: () => timed(fetch(`${server.url}/v1/pets?limit=100`, { headers }))
  }
}

const expectUnavailable = (answer: { status: number; headers: Headers; body: string }) => {
  expect(answer.status, answer.body).toBe(503)
  expect(JSON.parse(answer.body)).toEqual({
    code: "database_unavailable",
    message: expect.stringContaining("retry"),
    status: 503
  })
  expect(answer.headers.get("retry-after")).toBe("1")
}

describe("another process holds SQLite's write lock (as a backup or a sqlite3 shell does)", () => {
  it("the event loop never waits for it: /livez stays fast, /readyz and reads answer 200; a write waits in Effect, 201 once the lock is free within the bound, else 503 with Retry-After", async () => {
    using folder = temporaryFolder()
    const { path, server, create, list } = await serverOnSqlite(folder.path)
    const other = new Database(path)
    try {
      expect((await create("before")).status).toBe(201)

      other.exec("BEGIN IMMEDIATE")
      const lockedAt = performance.now()
      let locked = true
      const livez: Array<number> = []
      const reads: Array<number> = []
      const sampling = async (everyMillis: number, sample: () => Promise<unknown>) => {
        while (locked) {
          await sample()
          // Fixed: the pace at which the service is sampled while the lock is held.
          await Bun.sleep(everyMillis)
        }
      }
      const probing = Promise.all([
        sampling(10, async () => livez.push((await timed(fetch(`${server.url}/livez`))).millis)),
        sampling(50, async () => reads.push((await list()).status))
      ])
      // Another process's lock is not this instance's own fault: it stays in its balancer's pool.
      const ready = await timed(fetch(`${server.url}/readyz`))
      expect([ready.status, JSON.parse(ready.body).status]).toEqual([200, "ok"])

      // Held past the bound: the write gives up after about a second, as a 503.
      const refused = await create("refused")
      expectUnavailable(refused)
      expect(refused.millis).toBeGreaterThan(lockWaitSeconds * 1000 - 50)
      expect(refused.millis).toBeLessThan(lockWaitSeconds * 1000 + 500)

      // Freed within the bound: the write waiting for it is stored.
      const waiting = create("waited")
      // Fixed: the lock held 400 ms into the write's wait, within its bound.
      await Bun.sleep(400)
      other.exec("COMMIT")
      locked = false
      const waited = await waiting
      expect(waited.status, waited.body).toBe(201)
      expect(performance.now() - lockedAt).toBeGreaterThan(1000)
      await probing

      expect(reads.length).toBeGreaterThan(5)
      expect(reads.every((status) => status === 200), JSON.stringify(reads)).toBe(true)
      // Every /livez within 50 ms but for the odd scheduling hiccup of a shared machine (a few
      // hundred ms at worst); a synchronous wait for the lock would hold each for up to the
      // second of the bound.
      const fast = livez.filter((millis) => millis < 50).length
      expect(livez.length).toBeGreaterThan(20)
      expect(fast / livez.length, JSON.stringify(livez)).toBeGreaterThanOrEqual(0.95)
      expect(Math.max(...livez)).toBeLessThan(500)

      const names = JSON.parse((await list()).body).map((pet: { name: string }) => pet.name)
      expect(names).toEqual(["before", "waited"])
    } finally {
      other.close()
      await server.stop()
    }
  })

  it("an idempotent create retried after the lock is released answers the first attempt's pet, or one new pet; never two", async () => {
    using folder = temporaryFolder()
    const { path, server, create, list } = await serverOnSqlite(folder.path)
    const other = new Database(path)
    try {
      other.exec("BEGIN IMMEDIATE")
      const refused = await create("once", { "idempotency-key": "blip-1" })
      expectUnavailable(refused)
      other.exec("COMMIT")
      const retried = await create("once", { "idempotency-key": "blip-1" })
      expect(retried.status, retried.body).toBe(201)
      const again = await create("once", { "idempotency-key": "blip-1" })
      expect(again.status).toBe(201)
      expect(JSON.parse(again.body)).toEqual(JSON.parse(retried.body))
      expect(JSON.parse((await list()).body).map((pet: { name: string }) => pet.name)).toEqual(["once"])
    } finally {
      other.close()
      await server.stop()
    }
  })
})

describe("a transaction meeting another process's write lock", () => {
  it("fails with SQLite's busy answer once the bound has passed (a 503), not with a rollback of a transaction never begun (a 500); the next one is stored", async () => {
    using folder = temporaryFolder()
    const path = join(folder.path, "petstore.db")
    const connection = SqliteConnection.pipe(
      Layer.provide(AppConfig.make({ databaseUrl: path, databaseStatementTimeout: Duration.millis(200) }))
    )
    const program = Effect.gen(function*() {
      const sql = Context.get(yield* Layer.build(connection), SqlClient.SqlClient)
      const insert = (name: string) =>
        sql.withTransaction(sql`INSERT INTO settings (name, value) VALUES (${name}, 'x')`)
      const other = new Database(path)
      try {
        other.exec("BEGIN IMMEDIATE")
        const exit = yield* Effect.exit(insert("refused"))
        other.exec("COMMIT")
        expect(Exit.isFailure(exit)).toBe(true)
        if (Exit.isFailure(exit)) {
          expect(Cause.hasDies(exit.cause)).toBe(false)
          const failure = Cause.squash(exit.cause)
          expect(isSqlError(failure) ? toUnavailable(failure) : undefined).toMatchObject({
            reason: "busy",
            message: "database is locked"
          })
        }
        yield* insert("stored")
        const rows = yield* sql<{ name: string }>`SELECT name FROM settings WHERE value = 'x'`
        expect(rows.map((row) => row.name)).toEqual(["stored"])
      } finally {
        other.close()
      }
    })
    await Effect.runPromise(Effect.scoped(program))
  })
})

describe("the SQLite file deleted or replaced under the running server", () => {
  const errorLines = (logs: string, path: string) =>
    logs.split("\n").filter((line) => line.includes(`"logLevel":"ERROR"`) && line.includes(path))

  for (
    const [what, change] of [
      ["deleted", (path: string) => rmSync(path)],
      ["replaced by another database file", (path: string) => {
        copyFileSync(path, `${path}.copy`)
        renameSync(`${path}.copy`, path)
      }]
    ] as const
  ) {
    it(`${what}: noticed within 1 s, /readyz 503, writes 503 with Retry-After, an error naming the file; nothing more acknowledged`, async () => {
      using folder = temporaryFolder()
      const { path, server, create } = await serverOnSqlite(folder.path)
      try {
        expect((await create("kept")).status).toBe(201)
        expect((await fetch(`${server.url}/readyz`)).status).toBe(200)
        change(path)
        await waitFor(async () => (await fetch(`${server.url}/readyz`)).status === 503, {
          what: "/readyz answering 503",
          timeout: 1000
        })
        expectUnavailable(await create("lost"))
        expect(errorLines(server.logs(), path).some((line) => /deleted|replaced/.test(line)), server.logs()).toBe(true)
      } finally {
        await server.stop()
      }
    })
  }
})

describe("a damaged SQLite file", () => {
  it("stops the start with exit 1, naming the file and SQLite's own words; the file is left as it was", async () => {
    using folder = temporaryFolder()
    const path = join(folder.path, "petstore.db")
    expect((await runCommand(["src/bin/keys.ts", "create", "--name", "damaged"], { DATABASE_URL: path })).exitCode)
      .toBe(0)
    const database = new Database(path)
    database.exec("PRAGMA journal_mode = DELETE")
    const insert = database.prepare("INSERT INTO pets (name, category_id, status) VALUES (?, 1, 'available')")
    for (let i = 0; i < 2000; i++) insert.run(`pet ${i} `.repeat(20))
    database.close()
    // Pages past the first overwritten: the header is intact, the b-tree is not.
    const file = Bun.file(path)
    const bytes = new Uint8Array(await file.arrayBuffer())
    bytes.fill(0x5a, 4096 * 2, 4096 * 6)
    await Bun.write(path, bytes)

    const result = await runCommand(["src/bin/main.ts"], { DATABASE_URL: path, PORT: "1", METRICS_PORT: "off" })
    const output = result.stdout + result.stderr
    expect(result.exitCode).toBe(1)
    expect(output).toContain(`Cannot use the database ${path} (it is not a SQLite database, or it is damaged)`)
    expect(output).toMatch(/malformed|not a database/)
    expect(new Uint8Array(await Bun.file(path).arrayBuffer())).toEqual(bytes)
  })

  it("damaged under the running server: requests reading the damaged pages answer 503 database_unavailable, never 500; /readyz 503", async () => {
    using folder = temporaryFolder()
    const path = join(folder.path, "petstore.db")
    const key = await createKey({ DATABASE_URL: path }, "damaged")
    const database = new Database(path)
    const insert = database.prepare("INSERT INTO pets (name, category_id, status) VALUES (?, 1, 'available')")
    // Far more pages than SQLite's page cache (2 MB) holds, so reads go to the file.
    database.transaction(() => {
      for (let i = 0; i < 100_000; i++) insert.run(`pet ${i} `.repeat(8))
    })()
    database.exec("PRAGMA wal_checkpoint(TRUNCATE)")
    database.close()
    const server = await startServer({ DATABASE_URL: path })
    try {
      // Every page but the first (the header and the schema) overwritten in place: same file.
      const size = Bun.file(path).size
      const handle = await open(path, "r+")
      await handle.write(new Uint8Array(size - 4096).fill(0x5a), 0, size - 4096, 4096)
      await handle.close()
      const statuses = new Map<number, number>()
      for (let id = 1; id <= 100_000; id += 997) {
        const response = await fetch(`${server.url}/v1/pets/${id}`, { headers: { authorization: `Bearer ${key}` } })
        const body = await response.json()
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1)
        if (response.status === 503) {
          expect(body.code).toBe("database_unavailable")
          expect(response.headers.get("retry-after")).toBe("1")
        }
      }
      expect([...statuses.keys()].every((status) => status === 200 || status === 503), JSON.stringify([...statuses]))
        .toBe(true)
      expect(statuses.get(503)).toBeGreaterThan(0)
      expect(server.logs()).toMatch(/malformed/)
      // The damage is this instance's own: its balancer should take it out.
      const ready = await fetch(`${server.url}/readyz`)
      expect([ready.status, (await ready.json()).code]).toEqual([503, "database_unavailable"])
    } finally {
      await server.stop()
    }
  })
})
