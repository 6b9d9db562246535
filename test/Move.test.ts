import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { Effect } from "effect"
import { chmodSync, existsSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { knownVersion } from "../src/Move/SchemaVersion.js"
import { createKey, db, pgQuery, shows, sqliteQuery, sqliteRows } from "./support/MoveCommands.js"
import { everyField } from "./support/Pets.js"
import { createTestDatabase } from "./support/PostgresStores.js"
import { startServer, temporaryFolder } from "./support/ServerProcess.js"
import { sharedPostgresUrl } from "./support/SharedPostgres.js"
import { waitFor } from "./support/WaitFor.js"

const json = { "content-type": "application/json" }

/** The schema version this build's migrations make. */
const known = await Effect.runPromise(knownVersion)

const createPet = (url: string, key: string, body: object, idempotencyKey?: string) =>
  fetch(`${url}/v1/pets`, {
    method: "POST",
    headers: {
      ...json,
      authorization: `Bearer ${key}`,
      ...(idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey })
    },
    body: JSON.stringify(body)
  })

/** The body of the store's `i`th create: every field of a pet, with text that needs escaping in a COPY. */
const petBody = (i: number) => ({
  ...everyField,
  name: `pet ${i}\t"\\`,
  categoryId: i,
  status: i % 2 ? "sold" : "available"
})

/** A SQLite store as the service leaves it: pets, a valid and a revoked key, idempotency records; its cursor. */
const serviceStore = async (file: string, pets = 25) => {
  const key = await createKey(file, "alice")
  const revoked = await createKey(file, "bob")
  const server = await startServer({ DATABASE_URL: file })
  try {
    for (let i = 0; i < pets; i++) {
      const response = await createPet(server.url, key, petBody(i), `k${i}`)
      expect(response.status).toBe(201)
    }
    const page = await fetch(`${server.url}/v1/pets?limit=1&status=sold`, {
      headers: { authorization: `Bearer ${key}` }
    })
    const next = new URL(/<([^>]+)>/.exec(page.headers.get("link")!)![1]!)
    return { key, revoked, cursorPath: `${next.pathname}${next.search}` }
  } finally {
    await server.stop()
    const sqlite = new Database(file)
    sqlite.run("UPDATE api_keys SET revoked_at = '2026-01-02T03:04:05.678Z' WHERE name = 'bob'")
    sqlite.close()
  }
}

describe("db copy", () => {
  it("moves everything from SQLite to PostgreSQL and back: the same rows, and the service carries on where it was", async () => {
    using folder = temporaryFolder()
    await using target = await createTestDatabase()
    const file = join(folder.path, "petstore.db")
    const { key, revoked, cursorPath } = await serviceStore(file)

    // The target's URL from an environment variable: nothing on the command line to leak.
    const there = await db(["copy", "--from", file, "--to-env", "NEW_DATABASE_URL"], { NEW_DATABASE_URL: target.url })
    expect(there.stderr).toBe("")
    expect(there.exitCode).toBe(0)
    expect(there.stdout).toMatch(/^pets\s+25\s+25\s+([0-9a-f]{16})\s+\1\s+ok$/m)
    expect(there.stdout).toMatch(/next pets id 26/)

    const back = join(folder.path, "back.db")
    const home = await db(["copy", "--from-env", "NEW_DATABASE_URL", "--to", back], { NEW_DATABASE_URL: target.url })
    expect(home.exitCode).toBe(0)
    expect(sqliteRows(back)).toEqual(sqliteRows(file))

    const keys = await pgQuery<{ key_hash: string; created_at: Date; revoked_at: Date | null }>(
      target.url,
      "SELECT key_hash, created_at, revoked_at FROM api_keys ORDER BY id"
    )
    const original = sqliteQuery<{ key_hash: string; created_at: string; revoked_at: string | null }>(
      file,
      "SELECT * FROM api_keys ORDER BY id"
    )
    expect(keys.map((row) => [row.key_hash, row.created_at.toISOString(), row.revoked_at?.toISOString() ?? null]))
      .toEqual(original.map((row) => [row.key_hash, row.created_at, row.revoked_at]))

    const status = await db(["status", "--database-env", "NEW_DATABASE_URL"], { NEW_DATABASE_URL: target.url })
    expect(status.stdout).toMatch(/engine\s+PostgreSQL/)
    expect(status.stdout).toMatch(new RegExp(`schema version\\s+${known} \\(this build: ${known}\\)`))
    expect(status.stdout).toMatch(/^pets\s+25$/m)
    expect(status.stdout).toMatch(/^api_keys\s+2$/m)

    const server = await startServer({ DATABASE_URL: target.url })
    try {
      const auth = { authorization: `Bearer ${key}` }
      const page = await fetch(`${server.url}${cursorPath}`, { headers: auth })
      expect(page.status).toBe(200)
      expect((await page.json() as Array<{ id: number }>).map((pet) => pet.id)).toEqual([4])
      // The idempotent replay answers the pet as it was created, every field of it.
      const retry = await createPet(server.url, key, petBody(3), "k3")
      expect(retry.status).toBe(201)
      expect(await retry.json()).toEqual({ id: 4, ...petBody(3) })
      const fresh = await createPet(server.url, key, { name: "new", categoryId: 1 })
      expect(((await fresh.json()) as { id: number }).id).toBe(26)
      expect((await fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${revoked}` } })).status).toBe(
        401
      )
    } finally {
      await server.stop()
    }
  })

  it("sets the next id past every id ever handed out, checks what it copied, and refuses what it cannot copy safely", async () => {
    using folder = temporaryFolder()
    await using target = await createTestDatabase()
    const file = join(folder.path, "petstore.db")
    await serviceStore(file, 5)
    // The highest pet is gone, but its id was handed out: SQLite's counter remembers it.
    const sqlite = new Database(file)
    sqlite.run("DELETE FROM idempotency_keys WHERE pet_id = 5")
    sqlite.run("DELETE FROM pets WHERE id = 5")
    sqlite.close()

    expect((await db(["copy", "--from", file, "--to", target.url])).exitCode).toBe(0)
    expect(await pgQuery(target.url, "INSERT INTO pets (name, category_id) VALUES ('next', 1) RETURNING id::int"))
      .toEqual([{ id: 6 }])

    // A changed row: verify names the table and exits 1.
    await pgQuery(target.url, "DELETE FROM pets WHERE id = 6")
    expect((await db(["verify", "--from", file, "--to", target.url])).exitCode).toBe(0)
    await pgQuery(target.url, "UPDATE pets SET name = 'changed' WHERE id = 2")
    const verify = await db(["verify", "--from", file, "--to", target.url])
    expect(verify.exitCode).toBe(1)
    expect(verify.stdout).toMatch(/^pets .* DIFFERENT$/m)
    expect(verify.stdout).toMatch(/^api_keys .* ok$/m)
    expect(verify.stderr.trim()).toBe("verification failed: pets differ between source and target")

    // A target holding data is refused and left as it was.
    const again = await db(["copy", "--from", file, "--to", target.url])
    expect(again.exitCode).toBe(1)
    expect(again.stderr).toMatch(
      /^target postgres:\/\/\S+ already holds data \(pets: 4 rows, api_keys: 2 rows, idempotency_keys: 4 rows\); it was left untouched/
    )
    expect(await pgQuery(target.url, "SELECT name FROM pets WHERE id = 2")).toEqual([{ name: "changed" }])

    // A source from another schema version is refused, naming both versions.
    const future = new Database(file)
    future.run(`INSERT INTO effect_sql_migrations (migration_id, name) VALUES (${known + 3}, 'from_the_future')`)
    future.close()
    const newer = await db(["copy", "--from", file, "--to", join(folder.path, "other.db")])
    expect(newer.exitCode).toBe(1)
    expect(newer.stderr).toContain(`has schema version ${known + 3}, but this build knows schema version ${known}`)
    expect(existsSync(join(folder.path, "other.db"))).toBe(false)
  })

  it("takes every table's columns from both databases: verify compares every column, and a column only one side holds is refused in one line", async () => {
    using folder = temporaryFolder()
    await using target = await createTestDatabase()
    const file = join(folder.path, "petstore.db")
    await serviceStore(file, 4)
    const oneLine = (result: { stdout: string; stderr: string; exitCode: number }) => {
      expect(result.exitCode).toBe(1)
      expect(result.stderr.trim().split("\n")).toHaveLength(1)
      return result.stderr.trim()
    }
    expect((await db(["copy", "--from", file, "--to", target.url])).exitCode).toBe(0)

    // A column no list in this build names, the same on both sides: compared like any other.
    const sqlite = new Database(file)
    sqlite.run("ALTER TABLE pets ADD COLUMN colour TEXT")
    sqlite.run("UPDATE pets SET colour = 'brown' WHERE id = 2")
    sqlite.close()
    await pgQuery(target.url, "ALTER TABLE pets ADD COLUMN colour TEXT")
    await pgQuery(target.url, "UPDATE pets SET colour = 'brown' WHERE id = 2")
    expect((await db(["verify", "--from", file, "--to", target.url])).exitCode).toBe(0)
    await pgQuery(target.url, "UPDATE pets SET colour = 'black' WHERE id = 2")
    const changed = await db(["verify", "--from", file, "--to", target.url])
    expect(changed.exitCode).toBe(1)
    expect(changed.stdout).toMatch(/^pets .* DIFFERENT$/m)
    expect(changed.stderr.trim()).toBe("verification failed: pets differ between source and target")

    // A target that lacks a column the source holds, and the other way round.
    await pgQuery(target.url, "ALTER TABLE pets DROP COLUMN colour")
    const lacking = oneLine(await db(["verify", "--from", file, "--to", target.url]))
    expect(lacking.startsWith(`source ${file} and target postgres://`)).toBe(true)
    expect(lacking).toContain(" do not have the same columns: the target has no pets.colour; nothing was compared")
    expect(oneLine(await db(["verify", "--from", target.url, "--to", file]))).toContain(
      "do not have the same columns: the source has no pets.colour; nothing was compared"
    )

    // A source whose pets has a column this build's schema does not know: refused, not truncated.
    const other = join(folder.path, "other.db")
    expect(oneLine(await db(["copy", "--from", file, "--to", other]))).toBe(
      `source ${file} and target ${other} (made by this build's migrations) do not have the same columns: ` +
        "the target has no pets.colour; nothing was copied"
    )
    expect(existsSync(other)).toBe(false)
  })

  it("fails in one line without a password, leaving the target as it was, when a side cannot be used", async () => {
    using folder = temporaryFolder()
    await using target = await createTestDatabase()
    const file = join(folder.path, "petstore.db")
    await serviceStore(file, 4)
    const oneLine = (result: { stdout: string; stderr: string; exitCode: number }) => {
      expect(result.exitCode).toBe(1)
      expect(result.stderr.trim().split("\n")).toHaveLength(1)
      return result.stderr.trim()
    }

    expect(oneLine(await db(["copy", "--from", join(folder.path, "missing.db"), "--to", target.url])))
      .toBe(`source SQLite database ${join(folder.path, "missing.db")}: no such file`)
    const notADatabase = join(folder.path, "notes.txt")
    writeFileSync(notADatabase, "these are not the pets you are looking for\n".repeat(10))
    expect(oneLine(await db(["copy", "--from", notADatabase, "--to", target.url]))).toContain(
      "it is not a SQLite database"
    )

    // A role that needs its password, on the test cluster where every other role is trusted.
    const role = `mover_${Math.random().toString(36).slice(2, 8)}`
    const admin = await sharedPostgresUrl()
    await pgQuery(admin, `CREATE ROLE ${role} LOGIN PASSWORD 'right-horse-battery' SUPERUSER`)
    const [{ hba_file }] = await pgQuery<{ hba_file: string }>(admin, "SHOW hba_file")
    const hba = await Bun.file(hba_file).text()
    writeFileSync(hba_file, `host all ${role} 127.0.0.1/32 scram-sha-256\n${hba}`)
    await pgQuery(admin, "SELECT pg_reload_conf()")
    try {
      const url = new URL(target.url)
      url.username = role
      url.password = "wrong-staple"
      const wrong = oneLine(await db(["copy", "--from", file, "--to-env", "TARGET"], { TARGET: url.href }))
      expect(wrong).toContain("the user name or password is wrong")
      expect(shows(wrong, "wrong-staple")).toBe(false)
      expect(await pgQuery(target.url, "SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'")).toEqual(
        [{ n: 0 }]
      )

      // libpq's ways: PGPASSWORD, or ~/.pgpass, for a URL without a password.
      url.password = ""
      const viaEnvironment = await db(["status", "--database", url.href], { PGPASSWORD: "right-horse-battery" })
      expect(viaEnvironment.stderr).toBe("")
      expect(viaEnvironment.stdout).toMatch(/schema version\s+none/)
      const pgpass = join(folder.path, "pgpass")
      writeFileSync(pgpass, `127.0.0.1:*:*:${role}:right-horse-battery\n`)
      chmodSync(pgpass, 0o600)
      const viaPgpass = await db(["copy", "--from", file, "--to", url.href], { PGPASSFILE: pgpass })
      expect(viaPgpass.stderr).toBe("")
      expect(viaPgpass.exitCode).toBe(0)
    } finally {
      writeFileSync(hba_file, hba)
      await pgQuery(admin, "SELECT pg_reload_conf()")
    }
  })

  it("an interrupted copy ends within 2 s, or one whose target goes away, exits 1 in one line and leaves the target empty", async () => {
    using folder = temporaryFolder()
    await using target = await createTestDatabase()
    const file = join(folder.path, "petstore.db")
    await createKey(file)
    const sqlite = new Database(file)
    sqlite.run(
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300000) " +
        "INSERT INTO pets (name, category_id, status) SELECT 'pet ' || i, i, 'available' FROM n"
    )
    sqlite.close()
    const proc = Bun.spawn(["bun", "src/bin/db.ts", "copy", "--from", file, "--to", target.url], {
      cwd: new URL("..", import.meta.url).pathname,
      stdout: "pipe",
      stderr: "pipe"
    })
    // Interrupted once rows are on their way into the target.
    await waitFor(
      async () =>
        (await pgQuery(await sharedPostgresUrl(), "SELECT 1 FROM pg_stat_activity WHERE query LIKE 'COPY pets%'"))
          .length > 0,
      { what: "the copy's COPY into the target running" }
    )
    const signalledAt = performance.now()
    proc.kill("SIGINT")
    expect(await proc.exited).toBe(1)
    expect(performance.now() - signalledAt).toBeLessThan(2_000)
    const stderr = (await new Response(proc.stderr).text()).trim()
    expect(stderr).toBe(`interrupted: nothing was committed, and the target ${target.url} is as it was before`)
    expect(await pgQuery(target.url, "SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'")).toEqual([{
      n: 0
    }])

    // The target's connection cut in the middle of the copy: one line naming the target, nothing left in it.
    const cut = Bun.spawn(["bun", "src/bin/db.ts", "copy", "--from", file, "--to", target.url], {
      cwd: new URL("..", import.meta.url).pathname,
      stdout: "pipe",
      stderr: "pipe"
    })
    await waitFor(async () => {
      const [terminated] = await pgQuery<{ done: boolean }>(
        await sharedPostgresUrl(),
        "SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE query LIKE 'COPY pets%'"
      )
      return terminated?.done === true
    }, { what: "the copy's COPY into the target cut" })
    expect(await cut.exited).toBe(1)
    const cutError = (await new Response(cut.stderr).text()).trim()
    expect(cutError.split("\n")).toHaveLength(1)
    expect(cutError).toMatch(/^target PostgreSQL database postgres:\/\/\S+ \(the connection was lost\)/)
    expect(await pgQuery(target.url, "SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'")).toEqual([{
      n: 0
    }])
  })
})

/** Traffic from one key, as fast as the loops go, is not what these tests are about. */
const unlimited = { RATE_LIMIT_PER_SECOND: "100000", RATE_LIMIT_BURST: "100000" }

/** Creates and reads in two loops against whichever instance `target.url` names, recording every answer. */
const traffic = (target: { url: string }, key: string) => {
  const acknowledged: Array<number> = []
  const refused: Array<{ at: number; retryAfter: string | null; body: unknown }> = []
  const reads: Array<number | string> = []
  const created: Array<number> = []
  let running = true
  const auth = { authorization: `Bearer ${key}` }
  const writer = (async () => {
    for (let i = 0; running; i++) {
      const response = await createPet(target.url, key, { name: `live ${i}`, categoryId: i }).catch(() => undefined)
      if (response?.status === 201) {
        acknowledged.push(((await response.json()) as { id: number }).id)
        created.push(performance.now())
      } else if (response?.status === 503) {
        refused.push({
          at: performance.now(),
          retryAfter: response.headers.get("retry-after"),
          body: await response.json()
        })
        // Fixed: a writer refused retries at a client's pace, not in a tight loop.
        await Bun.sleep(20)
      } else {
        throw new Error(`create answered ${response?.status}`)
      }
    }
  })()
  const reader = (async () => {
    while (running) {
      const url = target.url
      const response = await fetch(`${url}/v1/pets?limit=5`, { headers: auth }).catch(() => undefined)
      const body = await response?.text()
      reads.push(response?.status === 200 ? 200 : `${url} ${response?.status} ${body}`)
    }
  })()
  return {
    acknowledged,
    refused,
    reads,
    created,
    stop: async () => {
      running = false
      await Promise.all([writer, reader])
    }
  }
}

describe("db read-only", () => {
  it("waits for a serving instance's write lock rather than fail: on once the lock is released", async () => {
    using folder = temporaryFolder()
    const file = join(folder.path, "petstore.db")
    await createKey(file)
    // Another process's transaction holds the write lock, as an instance's create does.
    const writer = new Database(file)
    writer.run("BEGIN IMMEDIATE")
    // Fixed: the lock is held 1.5 s, the wait the command must sit out.
    const released = Bun.sleep(1500).then(() => writer.run("COMMIT"))
    try {
      const on = await db(["read-only", "on"], { DATABASE_URL: file })
      expect(on.stderr).toBe("")
      expect(on.exitCode).toBe(0)
      expect(on.stdout).toMatch(/^read-only on since /)
      expect(sqliteQuery(file, "SELECT name FROM settings WHERE name = 'read_only'")).toEqual([{ name: "read_only" }])
    } finally {
      await released
      writer.close()
    }
  })
})

describe("the move runbook", () => {
  it(
    "switches a serving SQLite store to PostgreSQL with writes stopped, no acknowledged create lost, reads never down",
    async () => {
      using folder = temporaryFolder()
      await using target = await createTestDatabase()
      const file = join(folder.path, "petstore.db")
      const key = await createKey(file)
      const old = await startServer({ DATABASE_URL: file, ...unlimited })
      const current = { url: old.url }
      const load = traffic(current, key)
      try {
        await waitFor(() => load.acknowledged.length >= 10, { what: "10 creates acknowledged" })
        const on = await db(["read-only", "on"], { DATABASE_URL: file })
        expect(on.stderr).toBe("")
        expect(on.exitCode).toBe(0)
        const stoppedAt = performance.now()
        expect((await db(["status"], { DATABASE_URL: file })).stdout).toMatch(/read-only\s+on since \d{4}-/)
        expect(load.refused.length).toBeGreaterThan(0)
        expect(load.refused[0]).toMatchObject({
          retryAfter: "10",
          body: { code: "read_only", status: 503, message: expect.stringContaining("read-only") }
        })
        const copied = await db(["copy", "--from", file, "--to-env", "TARGET_URL"], { TARGET_URL: target.url })
        expect(copied.stderr).toBe("")
        expect(copied.exitCode).toBe(0)
        const fresh = await startServer({ DATABASE_URL: target.url, ...unlimited })
        current.url = fresh.url
        try {
          // As a load balancer does: no new request reaches the old instance once it is told to stop.
          // The second read since the switch, and a create, went to the new one.
          const readsAtSwitch = load.reads.length
          await waitFor(() => load.reads.length >= readsAtSwitch + 2 && load.created.at(-1)! > stoppedAt, {
            what: "reads and creates on the new instance"
          })
          await old.stop()
          const createdAtStop = load.created.length
          await waitFor(() => load.created.length >= createdAtStop + 5, { what: "5 creates after the old one stopped" })
          await load.stop()
          const onPostgres = new Set(
            (await pgQuery<{ id: number }>(target.url, "SELECT id::int AS id FROM pets")).map(({ id }) => id)
          )
          expect(load.acknowledged.filter((id) => !onPostgres.has(id))).toEqual([])
          expect(load.reads.filter((status) => status !== 200)).toEqual([])
          const firstRefused = load.refused[0]!.at
          const resumed = load.created.find((at) => at > firstRefused)!
          console.log(
            `runbook: ${load.acknowledged.length} creates acknowledged, writes stopped for ${
              ((resumed - firstRefused) / 1000).toFixed(1)
            } s`
          )
        } finally {
          await fresh.stop()
        }
      } finally {
        await load.stop()
        await old.stop()
      }
    },
    60_000
  )
})

describe("db backup", () => {
  it("writes a consistent copy while the service writes: it opens, passes integrity_check, and holds every acknowledged pet", async () => {
    using folder = temporaryFolder()
    const file = join(folder.path, "petstore.db")
    const key = await createKey(file)
    const server = await startServer({ DATABASE_URL: file, ...unlimited })
    const load = traffic({ url: server.url }, key)
    try {
      await waitFor(() => load.acknowledged.length >= 10, { what: "10 creates acknowledged" })
      const before = [...load.acknowledged]
      const backupFile = join(folder.path, "backup.db")
      const result = await db(["backup", backupFile], { DATABASE_URL: file })
      expect(result.stderr).toBe("")
      expect(result.exitCode).toBe(0)
      expect(result.stdout).toMatch(/integrity check ok/)
      const acknowledgedDuring = load.acknowledged.length - before.length
      await load.stop()
      expect(sqliteQuery(backupFile, "PRAGMA integrity_check")).toEqual([{ integrity_check: "ok" }])
      const saved = new Set(sqliteQuery<{ id: number }>(backupFile, "SELECT id FROM pets").map(({ id }) => id))
      expect(before.length).toBeGreaterThan(0)
      expect(before.filter((id) => !saved.has(id))).toEqual([])
      expect(acknowledgedDuring).toBeGreaterThan(0)

      const again = await db(["backup", backupFile], { DATABASE_URL: file })
      expect(again.exitCode).toBe(1)
      expect(again.stderr.trim()).toBe(`backup: ${backupFile} already exists; name a new file`)
    } finally {
      await load.stop()
      await server.stop()
    }
  })

  it("makes the backup's folder when it does not exist, as on a fresh checkout (`backups/petstore.db`)", async () => {
    using folder = temporaryFolder()
    const file = join(folder.path, "petstore.db")
    await createKey(file)
    const backupFile = join(folder.path, "backups", "daily", "petstore.db")
    const result = await db(["backup", backupFile], { DATABASE_URL: file })
    expect(result.stderr).toBe("")
    expect(result.exitCode).toBe(0)
    expect(sqliteQuery(backupFile, "PRAGMA integrity_check")).toEqual([{ integrity_check: "ok" }])
    expect(sqliteQuery(backupFile, "SELECT count(*) AS keys FROM api_keys")).toEqual([{ keys: 1 }])
  })
})
