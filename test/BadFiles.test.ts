import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"

const isRoot = process.getuid?.() === 0

/** A small tmpfs of its own (root only): a disk that can be filled, or made read-only. */
const smallDisk = (size: string) => {
  const path = mkdtempSync(join(tmpdir(), "petstore-disk-"))
  const mount = spawnSync("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", path])
  if (mount.status !== 0) {
    rmSync(path, { recursive: true, force: true })
    return undefined
  }
  return {
    path,
    readOnly: () => spawnSync("mount", ["-o", "remount,ro", path]),
    fill: () => spawnSync("sh", ["-c", `dd if=/dev/zero of=${join(path, "filler")} bs=4k 2>/dev/null; sync`]),
    free: () => rmSync(join(path, "filler"), { force: true }),
    [Symbol.dispose]: () => {
      spawnSync("umount", [path])
      rmSync(path, { recursive: true, force: true })
    }
  }
}
const canMount = isRoot && (() => {
  using disk = smallDisk("64k")
  return disk !== undefined
})()

/** Starts the service on `databaseUrl`, which must fail: its exit code and its output. */
const startFailing = async (databaseUrl: string) => {
  const result = await runCommand(["src/bin/main.ts"], { DATABASE_URL: databaseUrl, PORT: "1" })
  return { exitCode: result.exitCode, output: result.stdout + result.stderr }
}

const createDatabase = async (path: string) => {
  const created = await runCommand(["src/bin/keys.ts", "create", "--name", "files"], { DATABASE_URL: path })
  expect(created.exitCode).toBe(0)
  return created.stdout.trim().split("\n").at(-1)!
}

const noStackTrace = (output: string) => expect(output).not.toMatch(/\n\s+at |\\n\s+at /)

describe("bad files at start: a clear message, exit code 1, nothing overwritten", () => {
  it("a file that is not a SQLite database", async () => {
    using folder = temporaryFolder()
    const path = join(folder.path, "petstore.db")
    const garbage = new TextEncoder().encode("these are someone's notes, not a database\n".repeat(200))
    writeFileSync(path, garbage)
    const { exitCode, output } = await startFailing(path)
    expect(exitCode).toBe(1)
    expect(output).toContain(`Cannot use the database ${path} (it is not a SQLite database, or it is damaged)`)
    noStackTrace(output)
    expect(readFileSync(path)).toEqual(Buffer.from(garbage))
  })

  it.skipIf(isRoot && !canMount)("a read-only database, or a read-only folder", async () => {
    using folder = temporaryFolder()
    const seed = join(folder.path, "seed.db")
    await createDatabase(seed)
    const before = readFileSync(seed)
    if (canMount) {
      // Root writes through permissions, not through a read-only file system.
      using disk = smallDisk("4m")!
      writeFileSync(join(disk.path, "petstore.db"), before)
      disk.readOnly()
      const { exitCode, output } = await startFailing(join(disk.path, "petstore.db"))
      expect(exitCode).toBe(1)
      expect(output).toContain(`The folder ${disk.path} of the database is not writable`)
      expect(output).toContain("read-only file system")
      noStackTrace(output)
      expect(readFileSync(join(disk.path, "petstore.db"))).toEqual(before)
      const nested = await startFailing(join(disk.path, "data", "petstore.db"))
      expect(nested.exitCode).toBe(1)
      expect(nested.output).toContain(`names a file in ${join(disk.path, "data")}, a folder that does not exist`)
    } else if (!isRoot) {
      const path = join(folder.path, "readonly.db")
      writeFileSync(path, before)
      chmodSync(path, 0o444)
      const { exitCode, output } = await startFailing(path)
      expect(exitCode).toBe(1)
      expect(output).toContain(`The database ${path} is read-only or unreadable; it was left untouched`)
      expect(readFileSync(path)).toEqual(before)
      const locked = join(folder.path, "locked")
      mkdirSync(locked)
      chmodSync(locked, 0o555)
      const inLocked = await startFailing(join(locked, "petstore.db"))
      expect(inLocked.exitCode).toBe(1)
      expect(inLocked.output).toContain(`The folder ${locked} of the database is not writable`)
    }
  })

  it.skipIf(!canMount)(
    "a full disk: refused at start; at run time 503 database_unavailable with Retry-After, stored pets intact, back once space is freed",
    async () => {
      using full = smallDisk("512k")!
      full.fill()
      const refused = await startFailing(join(full.path, "petstore.db"))
      expect(refused.exitCode).toBe(1)
      expect(refused.output).toContain("(the disk is full)")
      noStackTrace(refused.output)

      using disk = smallDisk("8m")!
      const env = { DATABASE_URL: join(disk.path, "petstore.db") }
      const key = await createDatabase(env.DATABASE_URL)
      const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
      const server = await startServer(env)
      try {
        const create = (name: string) =>
          fetch(`${server.url}/v1/pets`, { method: "POST", headers, body: JSON.stringify({ name, categoryId: 1 }) })
        expect((await create("before")).status).toBe(201)
        disk.fill()
        // Enough writes to need new WAL pages on the full disk.
        let failed: Response | undefined
        for (let i = 0; i < 2000 && failed === undefined; i++) {
          const response = await create(`while full ${i} ${"x".repeat(200)}`)
          if (response.status !== 201) failed = response
        }
        expect(failed?.status).toBe(503)
        expect(failed!.headers.get("retry-after")).toBe("1")
        expect(await failed!.json()).toEqual({ code: "database_unavailable", message: expect.any(String), status: 503 })
        const stored = await (await fetch(`${server.url}/v1/pets?limit=1`, { headers })).json()
        expect(stored).toEqual([{ id: 1, name: "before", categoryId: 1 }])
        disk.free()
        expect((await create("after")).status).toBe(201)
        noStackTrace(server.logs())
        expect(server.logs()).toMatch(/"database unavailable".*database or disk is full/)
      } finally {
        await server.stop()
      }
    },
    60_000
  )
})
