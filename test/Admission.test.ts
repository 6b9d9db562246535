import { describe, expect, it } from "@effect/vitest"
import { join } from "node:path"
import { createTestDatabase } from "./support/PostgresStores.js"
import { runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

type Server = Awaited<ReturnType<typeof startServer>>

const createKey = async (env: Record<string, string>) =>
  (await runCommand(["src/bin/keys.ts", "create", "--name", "admission"], env)).stdout.trim().split("\n").at(-1)!

/** `count` requests at once, spread over the servers, each on a connection of its own. */
const burst = (servers: ReadonlyArray<Server>, count: number, headers: Record<string, string>) =>
  Promise.all(
    Array.from({ length: count }, (_, i) =>
      fetch(`${servers[i % servers.length]!.url}/v1/pets`, { headers: { connection: "close", ...headers } })
        .then((response) =>
          response.status
        ))
  )

const tally = (statuses: ReadonlyArray<number>) =>
  statuses.reduce<Record<number, number>>((counts, status) => ({ ...counts, [status]: (counts[status] ?? 0) + 1 }), {})

describe("admission across instances on one PostgreSQL database, behind a trusted proxy", () => {
  it("200 concurrent guesses from one client get at most the burst of 401s; valid keys and other clients are unaffected", async () => {
    await using database = await createTestDatabase()
    const env = { DATABASE_URL: database.url, TRUSTED_PROXIES: "127.0.0.1, ::1", AUTH_FAILURES_PER_MINUTE: "20" }
    const servers: Array<Server> = []
    try {
      servers.push(await startServer(env), await startServer(env))
      const key = await createKey(env)
      const attacker = { "x-forwarded-for": "203.0.113.9" }
      const statuses = await burst(servers, 200, { ...attacker, authorization: "Bearer ps_test_guess" })
      const counts = tally(statuses)
      // Tokens are leased, never spent twice: the tolerance over the burst is 10%, and none is used.
      expect(counts[401]).toBeGreaterThanOrEqual(1)
      expect(counts[401]).toBeLessThanOrEqual(22)
      expect(counts[401]! + counts[429]!).toBe(200)

      // The attacker's own valid key, other clients' keys and other clients' mistakes are answered as usual.
      for (const server of servers) {
        const call = (headers: Record<string, string>) =>
          fetch(`${server.url}/v1/pets`, { headers }).then((r) => r.status)
        expect(await call({ ...attacker, authorization: `Bearer ${key}` })).toBe(200)
        expect(await call({ "x-forwarded-for": "198.51.100.7", authorization: `Bearer ${key}` })).toBe(200)
        expect(await call({ "x-forwarded-for": "198.51.100.8", authorization: "Bearer ps_test_typo" })).toBe(401)
        expect(await call({ ...attacker, authorization: "Bearer ps_test_guess" })).toBe(429)
      }
    } finally {
      await Promise.all(servers.map((server) => server.stop()))
    }
  })

  it("a key's rate is spent across both instances within the tolerance: never over the burst, at most a lease each under", async () => {
    await using database = await createTestDatabase()
    const env = { DATABASE_URL: database.url, RATE_LIMIT_PER_SECOND: "0.01", RATE_LIMIT_BURST: "40" }
    const servers: Array<Server> = []
    try {
      servers.push(await startServer(env), await startServer(env))
      const key = await createKey(env)
      const counts = tally(await burst(servers, 120, { authorization: `Bearer ${key}` }))
      // A lease is a tenth of the burst, 4 tokens; each instance may hold one unspent.
      expect(counts[200]).toBeLessThanOrEqual(40)
      expect(counts[200]).toBeGreaterThanOrEqual(40 - 2 * 4)
      expect(counts[200]! + counts[429]!).toBe(120)
    } finally {
      await Promise.all(servers.map((server) => server.stop()))
    }
  })
})

describe("admission with WORKERS on SQLite, clients connecting directly", () => {
  it("200 concurrent guesses from one address get at most the burst of 401s, and a valid key from it is served", async () => {
    using folder = temporaryFolder()
    const env = { DATABASE_URL: join(folder.path, "petstore.db"), AUTH_FAILURES_PER_MINUTE: "20" }
    const key = await createKey(env)
    const server = await startServer({ ...env, WORKERS: "2" })
    try {
      await waitFor(() => server.logs().split(`"listening"`).length >= 3, {
        what: "both workers listening",
        interval: 50
      })
      // Forwarding headers from a peer that is not trusted change nothing.
      const counts = tally(
        await burst([server], 200, { authorization: "Bearer ps_test_guess", "x-forwarded-for": "1.2.3.4" })
      )
      expect(counts[401]).toBeGreaterThanOrEqual(1)
      expect(counts[401]).toBeLessThanOrEqual(20)
      expect(counts[401]! + counts[429]!).toBe(200)
      for (let i = 0; i < 4; i++) {
        const status = await fetch(`${server.url}/v1/pets`, {
          headers: { connection: "close", authorization: `Bearer ${key}` }
        })
        expect(status.status).toBe(200)
      }
    } finally {
      await server.stop()
    }
  })
})
