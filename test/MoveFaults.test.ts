import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { Effect } from "effect"
import fc from "fast-check"
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Deadlines } from "../src/Move/PostgresSession.js"
import { describeStoreFailure, parseStore, withoutPassword } from "../src/Move/Store.js"
import { createKey, db, pgQuery, shows } from "./support/MoveCommands.js"
import { createTestDatabase } from "./support/PostgresStores.js"
import { temporaryFolder } from "./support/ServerProcess.js"
import { tcpForwarder } from "./support/TcpForwarder.js"
import { waitFor } from "./support/WaitFor.js"

const root = new URL("..", import.meta.url).pathname

/** A SQLite store the service made, with `pets` pets. */
const storeWithPets = async (file: string, pets: number) => {
  await createKey(file)
  const sqlite = new Database(file)
  sqlite.run(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${pets}) ` +
      "INSERT INTO pets (name, category_id, status) SELECT 'pet ' || i, i, 'available' FROM n"
  )
  sqlite.close()
}

/** `db copy` as a process of its own, for signals and for timing how long it takes to end. */
const startCopy = (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const proc = Bun.spawn(["bun", "src/bin/db.ts", "copy", ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdout: "pipe",
    stderr: "pipe"
  })
  const stdout = new Response(proc.stdout).text()
  const stderr = new Response(proc.stderr).text()
  return {
    proc,
    ended: async () => ({ exitCode: await proc.exited, stdout: await stdout, stderr: (await stderr).trim() }),
    // A test that fails half-way leaves no copy running.
    [Symbol.dispose]: () => proc.exitCode === null && proc.kill("SIGKILL")
  }
}

/** Waits, up to 15 s, until the copy into `database` is sending pets (COPY in progress). */
const copyingPets = async (database: string) => {
  const admin = new URL(database)
  admin.pathname = "/postgres"
  const name = new URL(database).pathname.slice(1)
  await waitFor(async () =>
    (await pgQuery(
      admin.href,
      "SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND query LIKE 'COPY pets%'",
      [name]
    )).length > 0, { what: "the copy never started sending pets", timeout: 15_000, interval: 20 })
}

/** Waits, up to 10 s, until no session of the copy is left on `database` (the server ended them). */
const sessionsGone = async (database: string) => {
  const admin = new URL(database)
  admin.pathname = "/postgres"
  const name = new URL(database).pathname.slice(1)
  await waitFor(async () =>
    (await pgQuery(
      admin.href,
      "SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND application_name = 'petstore db'",
      [name]
    )).length === 0, { what: "the copy's sessions were never ended", timeout: 10_000, interval: 20 })
}

const tablesIn = async (url: string) =>
  (await pgQuery<{ name: string }>(
    url,
    "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
  ))
    .map(({ name }) => name)

/** What a target the copy made its schema in and then could not clean holds: the empty tables. */
const emptySchema = ["api_keys", "effect_sql_migrations", "idempotency_keys", "pets", "rate_limit_buckets", "settings"]

/** Short deadlines, so that a fault costs the test a second or two. */
const short = { DB_CONNECT_TIMEOUT_SECONDS: "1", DB_STATEMENT_TIMEOUT_SECONDS: "1" }

describe("db copy against a server that stops answering", () => {
  it("the defaults end a copy into a hung target within 30 s: one answer's deadline, then at most the connect deadline to clean up", () =>
    Effect.gen(function*() {
      const { connectMillis, statementMillis } = yield* Deadlines
      expect(statementMillis + Math.min(5_000, connectMillis)).toBeLessThanOrEqual(25_000)
      expect(connectMillis).toBeLessThanOrEqual(25_000)
    }).pipe(Effect.runSync))

  it("a server that accepts but never answers ends the copy after the connect deadline, in one line naming that side", async () => {
    using folder = temporaryFolder()
    const file = join(folder.path, "petstore.db")
    await storeWithPets(file, 10)
    await using silent = await tcpForwarder(9, { frozen: true })
    const url = `postgres://petstore:sesame-Street-42@127.0.0.1:${silent.port}/petstore`

    const startedAt = performance.now()
    const toSilent = await db(["copy", "--from", file, "--to", url], short)
    expect(performance.now() - startedAt).toBeLessThan(6_000)
    expect(toSilent.exitCode).toBe(1)
    // A password on the command line is warned about, pointing to the way without it.
    expect(toSilent.stderr.trim().split("\n")).toEqual([
      "warning: --to holds a password, which other users see in ps while the command runs and the shell's history " +
      "keeps; put the URL in an environment variable and give its name with --to-env",
      `target PostgreSQL database postgres://petstore@127.0.0.1:${silent.port}/petstore (it did not answer in time): ` +
      "no answer within 1 s (DB_CONNECT_TIMEOUT_SECONDS)"
    ])
    expect(shows(toSilent.stderr, "sesame", "Street-42")).toBe(false)

    const fromSilent = await db(["copy", "--from-env", "SOURCE", "--to", join(folder.path, "back.db")], {
      ...short,
      SOURCE: url
    })
    expect(fromSilent.exitCode).toBe(1)
    expect(fromSilent.stderr.trim()).toBe(
      `source PostgreSQL database postgres://petstore@127.0.0.1:${silent.port}/petstore (it did not answer in time): ` +
        "no answer within 1 s (DB_CONNECT_TIMEOUT_SECONDS)"
    )
    expect(readdirSync(folder.path)).not.toContain("back.db")
  })

  it("a target that stops answering mid-copy ends it after the statement deadline, naming the target; a second copy into it works", async () => {
    using folder = temporaryFolder()
    await using target = await createTestDatabase()
    const file = join(folder.path, "petstore.db")
    await storeWithPets(file, 100_000)
    const proxy = await tcpForwarder(Number(new URL(target.url).port))
    const through = proxy.through(target.url)
    try {
      using copy = startCopy(["--from", file, "--to-env", "TARGET"], { ...short, TARGET: through })
      await copyingPets(target.url)
      proxy.freeze()
      const stalledAt = performance.now()
      const result = await copy.ended()
      // One deadline for the answer, one to try to clean up, and the process's own start and end.
      expect(performance.now() - stalledAt).toBeLessThan(5_000)
      expect(result.exitCode).toBe(1)
      expect(result.stderr).toBe(
        `target PostgreSQL database ${through} (it did not answer in time): ` +
          "no answer within 1 s (DB_STATEMENT_TIMEOUT_SECONDS)"
      )
    } finally {
      // The network path back: the server sees the copy's session end and rolls its transaction back.
      await proxy[Symbol.asyncDispose]()
    }
    await sessionsGone(target.url)
    expect(await tablesIn(target.url)).toEqual(emptySchema)
    expect(await pgQuery(target.url, "SELECT count(*)::int AS n FROM pets")).toEqual([{ n: 0 }])

    const again = await db(["copy", "--from", file, "--to", target.url])
    expect(again.stderr).toBe("")
    expect(again.exitCode).toBe(0)
    expect(again.stdout).toMatch(/^pets\s+100000\s+100000\s+([0-9a-f]{16})\s+\1\s+ok$/m)
  })
  it("a source that stops answering mid-copy ends it after the statement deadline, naming the source; the target file is removed", async () => {
    using folder = temporaryFolder()
    await using source = await createTestDatabase()
    const file = join(folder.path, "petstore.db")
    await storeWithPets(file, 100_000)
    expect((await db(["copy", "--from", file, "--to", source.url])).exitCode).toBe(0)
    const proxy = await tcpForwarder(Number(new URL(source.url).port))
    const through = proxy.through(source.url)
    const back = join(folder.path, "back.db")
    try {
      using copy = startCopy(["--from-env", "SOURCE", "--to", back], { ...short, SOURCE: through })
      // The target file is made before the first page is read, and 100,000 pets take far longer than a poll.
      await waitFor(() => existsSync(back), { what: "the target file made", timeout: 15_000, interval: 5 })
      proxy.freeze()
      const stalledAt = performance.now()
      const result = await copy.ended()
      expect(performance.now() - stalledAt).toBeLessThan(5_000)
      expect(result.exitCode).toBe(1)
      expect(result.stderr).toBe(
        `source PostgreSQL database ${through} (it did not answer in time): no answer within 1 s (DB_STATEMENT_TIMEOUT_SECONDS)`
      )
    } finally {
      await proxy[Symbol.asyncDispose]()
    }
    expect(readdirSync(folder.path).filter((name) => name.startsWith("back.db"))).toEqual([])
  })
})

describe("db copy stopped with Ctrl-C", () => {
  it("into a target that stopped answering: ends within 2 s, says what it left, and a second copy into it works", async () => {
    using folder = temporaryFolder()
    await using target = await createTestDatabase()
    const file = join(folder.path, "petstore.db")
    await storeWithPets(file, 100_000)
    const proxy = await tcpForwarder(Number(new URL(target.url).port))
    const through = proxy.through(target.url)
    try {
      // The default deadlines: it is the signal that ends the wait, not a deadline.
      using copy = startCopy(["--from", file, "--to-env", "TARGET"], { TARGET: through })
      await copyingPets(target.url)
      proxy.freeze()
      // Fixed: the fault held a while, so that the copy is waiting on the target at the signal.
      await Bun.sleep(200)
      const signalledAt = performance.now()
      copy.proc.kill("SIGINT")
      const result = await copy.ended()
      expect(performance.now() - signalledAt).toBeLessThan(2_000)
      expect(result.exitCode).toBe(1)
      // Either the clean-up's own word (it gave up on the target), or, on a loaded machine, the stop's bound's.
      expect([
        `interrupted: nothing was committed; ${through} did not answer in time to remove the empty tables this copy ` +
        "made in it, and a copy into it again works",
        `interrupted: nothing was committed; the empty tables the copy may have made in ${through} may be left, and a ` +
        "copy into it again works"
      ]).toContain(result.stderr)
    } finally {
      await proxy[Symbol.asyncDispose]()
    }
    await sessionsGone(target.url)
    expect(await tablesIn(target.url)).toEqual(emptySchema)

    const again = await db(["copy", "--from", file, "--to", target.url])
    expect(again.stderr).toBe("")
    expect(again.exitCode).toBe(0)
    expect(again.stdout).toMatch(/^pets\s+100000\s+100000\s+([0-9a-f]{16})\s+\1\s+ok$/m)
  })
})

/** A tmpfs of its own (we run as root in the test set-up), unmounted and removed on dispose. */
const tmpfs = (options: string) => {
  const path = mkdtempSync(join(tmpdir(), "petstore-tmpfs-"))
  const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", options, "tmpfs", path]).status === 0
  return {
    path,
    mounted,
    [Symbol.dispose]: () => {
      if (mounted) spawnSync("umount", [path])
      rmSync(path, { recursive: true, force: true })
    }
  }
}

const canMount = process.getuid?.() === 0

describe("db backup's failures are the backup's", () => {
  it("a path through a file: one line naming the backup, nothing left behind", async () => {
    using folder = temporaryFolder()
    const file = join(folder.path, "petstore.db")
    await storeWithPets(file, 10)
    writeFileSync(join(folder.path, "notes"), "not a folder\n")
    const result = await db(["backup", join(folder.path, "notes", "backup.db")], { DATABASE_URL: file })
    expect(result.exitCode).toBe(1)
    expect(result.stderr.trim().split("\n")).toHaveLength(1)
    expect(result.stderr).toMatch(
      new RegExp(
        `^backup SQLite database ${
          join(folder.path, "notes", "backup.db")
        } \\(a part of its path is not a folder\\): ENOTDIR`
      )
    )
  })

  it.skipIf(!canMount)(
    "a full disk and a read-only folder: one line naming the backup, no partial file or journal left",
    async () => {
      using folder = temporaryFolder()
      const file = join(folder.path, "petstore.db")
      await storeWithPets(file, 40_000)
      {
        using full = tmpfs("size=1m")
        expect(full.mounted).toBe(true)
        const backup = join(full.path, "backup.db")
        const result = await db(["backup", backup], { DATABASE_URL: file })
        expect(result.exitCode).toBe(1)
        expect(result.stderr.trim()).toBe(
          `backup SQLite database ${backup} (the disk is full): database or disk is full`
        )
        expect(readdirSync(full.path)).toEqual([])
      }
      {
        using readOnly = tmpfs("size=1m,ro")
        expect(readOnly.mounted).toBe(true)
        const backup = join(readOnly.path, "backup.db")
        const result = await db(["backup", backup], { DATABASE_URL: file })
        expect(result.exitCode).toBe(1)
        expect(result.stderr.trim()).toBe(
          `backup SQLite database ${backup} (the file system is read-only): EROFS: read-only file system, open '${backup}.partial'`
        )
        expect(readdirSync(readOnly.path)).toEqual([])
      }
    }
  )

  it("a full disk is told as such whichever side meets it", () => {
    const store = { engine: "sqlite", filename: "/backups/petstore.db", label: "/backups/petstore.db" } as const
    const full = Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" })
    expect(describeStoreFailure(store, "backup", full).message).toBe(
      "backup SQLite database /backups/petstore.db (the disk is full): ENOSPC: no space left on device, write"
    )
  })
})

describe("passwords", () => {
  it("no part of a password is shown, whatever characters it holds", () => {
    fc.assert(fc.property(fc.string({ minLength: 1 }), (password) => {
      const label = withoutPassword(`postgres://petstore:${password}@db.internal:5432/petstore`)
      expect(["postgres://petstore@db.internal:5432/petstore", "postgres://db.internal:5432/petstore"]).toContain(label)
    }))
    expect(withoutPassword("postgres://petstore:p@ss/w0rd@db.internal:5432/petstore")).toBe(
      "postgres://db.internal:5432/petstore"
    )
    expect(withoutPassword("postgres://petstore:p%40ss%2Fw0rd@db.internal:5432/petstore")).toBe(
      "postgres://petstore@db.internal:5432/petstore"
    )
  })

  it("a URL whose password's reserved characters are not encoded is refused without quoting it", () => {
    for (const password of ["p@ss/w0rd", "a/b", "q?x", "h#sh"]) {
      const refused = Effect.runSync(
        Effect.flip(parseStore(`postgres://petstore:${password}@db.internal:5432/petstore`, "--to"))
      )
      expect(refused.message).toBe(
        "--to: is not a valid postgres:// URL (a password's reserved characters, such as @ / ? #, must be percent-encoded)"
      )
    }
  })

  it("the driver's words are left out whole when they hold the password, so that no mark shows where it stood", () => {
    const store = {
      engine: "postgres",
      url: "postgres://petstore:p@db.internal:5432/petstore",
      label: "postgres://petstore@db.internal:5432/petstore"
    } as const
    const message = describeStoreFailure(store, "target", new Error("timeout expired")).message
    expect(message).toBe(
      "target PostgreSQL database postgres://petstore@db.internal:5432/petstore: the driver's message is left out: it held the password"
    )
  })

  it("a password on the command line draws a warning naming the option to use instead; from the environment, none", async () => {
    using folder = temporaryFolder()
    const file = join(folder.path, "petstore.db")
    await storeWithPets(file, 1)
    await using target = await createTestDatabase()
    // The test cluster trusts loopback: the password is carried, never checked.
    const withPassword = new URL(target.url)
    withPassword.password = "sesame-Street-42"
    const given = await db(["status", "--database", withPassword.href])
    expect(given.exitCode).toBe(0)
    expect(given.stderr.trim()).toBe(
      "warning: --database holds a password, which other users see in ps while the command runs and the shell's " +
        "history keeps; put the URL in an environment variable and give its name with --database-env"
    )
    const fromEnvironment = await db(["status", "--database-env", "URL"], { URL: withPassword.href })
    expect(fromEnvironment.stderr).toBe("")
    expect(shows(given.stdout + fromEnvironment.stdout, "sesame", "Street-42")).toBe(false)
  })
})
