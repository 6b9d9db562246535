import { describe, expect, it } from "@effect/vitest"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { createKey, freePort, spawnServer, startServer, temporaryFolder } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

const listeningLines = (logs: string) => logs.split("\n").filter((line) => line.includes(`"listening"`)).length

/** The first service on SQLite, started with `workers`, once every one of its processes serves. */
const startFirst = async (folder: string, workers: number) => {
  const env = { DATABASE_URL: join(folder, "first.db"), WORKERS: String(workers) }
  const server = await startServer(env)
  await waitFor(() => listeningLines(server.logs()) === workers, { what: `${workers} processes listening` })
  return { ...server, port: Number(new URL(server.url).port), key: await createKey(env) }
}

/** A service on `port` with `workers`, on the SQLite file `database` in `folder`, output kept. */
const spawnService = (folder: string, port: number, workers: number, database: string) => {
  const proc = spawnServer({ WORKERS: String(workers), DATABASE_URL: join(folder, database) }, port)
  const output = Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()])
  return { proc, lines: () => output.then(([stdout, stderr]) => (stdout + stderr).trim().split("\n")) }
}

/** A second service on `port`, on a database of its own, run to its end: its exit code and output. */
const startSecond = async (folder: string, port: number, workers: number) => {
  const { lines, proc } = spawnService(folder, port, workers, "second.db")
  // A second service that joined the port would run on: ended after 10 s, so the test fails without leaving it.
  await waitFor(() => proc.exitCode !== null, { what: "the second service's exit" }).catch(() => proc.kill("SIGKILL"))
  const exitCode = await proc.exited
  return { exitCode, lines: await lines() }
}

/** Every one of `count` requests, each on a new connection, answered 200. */
const allServed = async (url: string, key: string, count = 20) => {
  const headers = { authorization: `Bearer ${key}`, connection: "close" }
  const statuses = await Promise.all(
    Array.from({ length: count }, () => fetch(`${url}/v1/pets`, { headers }).then((response) => response.status))
  )
  return statuses.every((status) => status === 200)
}

const refusal = (port: number) =>
  `failed to start: Cannot serve on 127.0.0.1:${port} (HOST, PORT): another Pet Store service already serves port ${port}; stop it first, or choose another PORT`

describe("one port, one service, whatever WORKERS is for either", () => {
  for (const first of [2, 1]) {
    it(`a second service on the port of one with WORKERS=${first} is refused in one line, exit 1; the first keeps serving`, async () => {
      using folder = temporaryFolder()
      const server = await startFirst(folder.path, first)
      try {
        for (const second of [2, 1]) {
          const { exitCode, lines } = await startSecond(folder.path, server.port, second)
          expect(exitCode, `WORKERS=${second}`).toBe(1)
          expect(lines, `WORKERS=${second}`).toHaveLength(1)
          expect(JSON.parse(lines[0]!)).toMatchObject({ logLevel: "ERROR", message: refusal(server.port) })
          // Refused before it touched anything: its database was never made.
          expect(existsSync(join(folder.path, "second.db"))).toBe(false)
          expect(await allServed(server.url, server.key)).toBe(true)
        }
        expect(await server.stop("SIGTERM")).toBe(0)
      } finally {
        server.proc.kill("SIGKILL")
      }
    })
  }

  it("of two services started at the same moment on one port, one serves and the other is refused", async () => {
    using folder = temporaryFolder()
    const port = freePort()
    // Neither listens yet when the other starts: only the claim tells them apart.
    const both = [spawnService(folder.path, port, 2, "a.db"), spawnService(folder.path, port, 2, "b.db")]
    try {
      const [refused, serving] = await Promise.race(
        both.map((service, index) => service.proc.exited.then(() => [service, both[1 - index]!] as const))
      )
      expect(refused.proc.exitCode).toBe(1)
      expect((await refused.lines()).map((line) => JSON.parse(line).message)).toEqual([refusal(port)])
      const answered = () => fetch(`http://127.0.0.1:${port}/livez`).then((response) => response.ok, () => false)
      await waitFor(answered, { what: "the service that was not refused answering" })
      serving.proc.kill("SIGTERM")
      expect(await serving.proc.exited).toBe(0)
    } finally {
      for (const { proc } of both) proc.kill("SIGKILL")
    }
  })

  it("a server that is not this service's, sharing the port through SO_REUSEPORT, refuses a start too", async () => {
    using folder = temporaryFolder()
    const other = Bun.serve({ hostname: "127.0.0.1", port: 0, reusePort: true, fetch: () => new Response("other") })
    try {
      const { exitCode, lines } = await startSecond(folder.path, other.port!, 2)
      expect(exitCode).toBe(1)
      expect(lines).toHaveLength(1)
      expect(JSON.parse(lines[0]!).message).toBe(
        `failed to start: Cannot serve on 127.0.0.1:${other.port} (HOST, PORT): another process already accepts connections on port ${other.port}; stop it first, or choose another PORT`
      )
    } finally {
      await other.stop(true)
    }
  })

  it("the port is free again as soon as its service is killed: a new one starts on it at once", async () => {
    using folder = temporaryFolder()
    const server = await startFirst(folder.path, 1)
    server.proc.kill("SIGKILL")
    await server.proc.exited
    const next = await startServer({ DATABASE_URL: join(folder.path, "first.db") }, server.port)
    expect(await next.stop("SIGTERM")).toBe(0)
  })
})
