import { describe, expect, it } from "@effect/vitest"
import { join } from "node:path"
import { createTestDatabase } from "./support/PostgresStores.js"
import { freePort, isRunning, runCommand, spawnServer, startServer, temporaryFolder } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

/** The pids of the workers the supervisor's log says it started, newest last. */
const workerPids = (logs: string) =>
  logs.trim().split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line))
    .filter((line) => line.message === "worker started").map((line) => line.annotations.pid as number)

const listeningLines = (logs: string) => logs.split("\n").filter((line) => line.includes(`"listening"`)).length

describe("WORKERS: several server processes on one port", () => {
  it("on SQLite: serve together, hold the rate limit together, are restarted when they die, and all stop on SIGTERM", async () => {
    using folder = temporaryFolder()
    const env = { DATABASE_URL: join(folder.path, "petstore.db"), RATE_LIMIT_PER_SECOND: "0.01", RATE_LIMIT_BURST: "6" }
    const key = (await runCommand(["src/bin/keys.ts", "create", "--name", "workers"], env)).stdout.trim().split("\n")
      .at(-1)!
    const server = await startServer({ ...env, WORKERS: "2" })
    try {
      await waitFor(() => listeningLines(server.logs()) === 2, { what: "both workers listening" })
      const [first, second] = workerPids(server.logs())
      expect([first, second].every((pid) => pid !== undefined && isRunning(pid))).toBe(true)

      // Each request on a new connection, so the kernel spreads them over both workers; each worker
      // enforces half of the burst of 6, so together they never allow more than 6.
      const call = () =>
        fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}`, connection: "close" } })
      const statuses = await Promise.all(Array.from({ length: 16 }, call)).then((all) => all.map((r) => r.status))
      expect(statuses.filter((status) => status === 200).length).toBeGreaterThanOrEqual(3)
      expect(statuses.filter((status) => status === 200).length).toBeLessThanOrEqual(6)
      expect(statuses.filter((status) => status !== 200).every((status) => status === 429)).toBe(true)

      process.kill(first!, "SIGKILL")
      await waitFor(() => workerPids(server.logs()).length === 3, { what: "a third worker started" })
      const restarted = workerPids(server.logs())[2]!
      await waitFor(() => listeningLines(server.logs()) === 3, { what: "the third worker listening" })
      expect(isRunning(restarted)).toBe(true)
      expect((await fetch(`${server.url}/livez`, { headers: { connection: "close" } })).status).toBe(200)

      expect(await server.stop("SIGTERM")).toBe(0)
      expect(isRunning(second!) || isRunning(restarted)).toBe(false)
    } finally {
      server.proc.kill("SIGKILL")
    }
  })

  for (const workers of [1, 2]) {
    it(`WORKERS=${workers}: a server process takes connections only once it can answer them`, async () => {
      using folder = temporaryFolder()
      const port = freePort()
      const proc = spawnServer({ WORKERS: String(workers), DATABASE_URL: join(folder.path, "petstore.db") }, port)
      // Drained, so that a worker writing to it never waits on a full pipe.
      void new Response(proc.stderr).arrayBuffer()
      let output = ""
      void proc.stdout.pipeTo(
        new WritableStream({ write: (chunk) => void (output += new TextDecoder().decode(chunk)) })
      )
      const listening = () => output.split("\n").filter((line) => line.includes(`"listening"`)).length
      try {
        // From the start until every one serves, calls from four clients, each on a new connection: refused, or answered 200.
        const statuses = new Set<number>()
        const poll = () =>
          waitFor(async () => {
            const status = await fetch(`http://127.0.0.1:${port}/livez`, { headers: { connection: "close" } })
              .then((response) => response.status, () => undefined)
            if (status !== undefined) statuses.add(status)
            return listening() >= workers
          }, { what: `${workers} workers listening`, timeout: 20_000, interval: 5 })
        await Promise.all(Array.from({ length: 4 }, poll))
        expect(listening()).toBe(workers)
        expect([...statuses].filter((status) => status !== 200)).toEqual([])
        proc.kill("SIGTERM")
        expect(await proc.exited).toBe(0)
      } finally {
        proc.kill("SIGKILL")
      }
    })
  }

  it("workers whose supervisor is killed stop by themselves, leaving nothing on the port", async () => {
    using folder = temporaryFolder()
    const server = await startServer({ DATABASE_URL: join(folder.path, "petstore.db"), WORKERS: "2" })
    try {
      await waitFor(() => workerPids(server.logs()).length === 2, { what: "both workers started" })
      const workers = workerPids(server.logs())
      server.proc.kill("SIGKILL")
      await waitFor(() => workers.every((pid) => !isRunning(pid)), { what: "every worker gone" })
      expect(await fetch(`${server.url}/livez`).then(() => "answered", () => "refused")).toBe("refused")
    } finally {
      server.proc.kill("SIGKILL")
    }
  })

  it("on PostgreSQL: the workers serve one database", async () => {
    await using database = await createTestDatabase()
    const env = { DATABASE_URL: database.url }
    const key = (await runCommand(["src/bin/keys.ts", "create", "--name", "workers"], env)).stdout.trim().split("\n")
      .at(-1)!
    const server = await startServer({ ...env, WORKERS: "2" })
    try {
      const headers = { authorization: `Bearer ${key}`, "content-type": "application/json", connection: "close" }
      const created = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          fetch(`${server.url}/v1/pets`, {
            method: "POST",
            headers,
            body: JSON.stringify({ name: `p${i}`, categoryId: i })
          })
            .then((r) => r.json()))
      )
      expect(new Set(created.map((pet) => pet.id)).size).toBe(20)
      const listed = await (await fetch(`${server.url}/v1/pets?limit=100`, { headers })).json()
      expect(listed).toHaveLength(20)
      expect(await server.stop("SIGTERM")).toBe(0)
    } finally {
      server.proc.kill("SIGKILL")
    }
  })
})
