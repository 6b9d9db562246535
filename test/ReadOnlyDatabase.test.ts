import { describe, expect, it } from "@effect/vitest"
import { pgQuery } from "./support/MoveCommands.js"
import { startPostgresCluster, startStandby } from "./support/PostgresCluster.js"
import { createTestDatabase } from "./support/PostgresStores.js"
import { createKey, freePort, runCommand, startServer } from "./support/ServerProcess.js"
import { sharedPostgresUrl } from "./support/SharedPostgres.js"
import { tcpForwarder } from "./support/TcpForwarder.js"
import { waitFor } from "./support/WaitFor.js"

const timeouts = {
  REQUEST_TIMEOUT_SECONDS: "1",
  DATABASE_CONNECT_TIMEOUT_SECONDS: "0.5",
  DATABASE_STATEMENT_TIMEOUT_SECONDS: "0.5",
  // Leases of 2 tokens: the shared bucket is written every other request.
  RATE_LIMIT_BURST: "20"
}

const readOnlyBody = {
  code: "database_read_only",
  message: expect.stringContaining("read-only"),
  status: 503
}

/** Tries `attempt` every 50 ms until it holds, failing past `withinMillis`; how long it took. */
const within = async (withinMillis: number, attempt: () => Promise<boolean>) => {
  const startedAt = performance.now()
  await waitFor(attempt, { what: "the change seen", timeout: withinMillis, interval: 50 })
  return performance.now() - startedAt
}

/** A service against `databaseUrl`, and what a client asks of it. */
const serviceOn = async (databaseUrl: string, extra: Record<string, string> = {}) => {
  const env = { DATABASE_URL: databaseUrl, ...timeouts, ...extra }
  const key = await createKey(env, "read-only")
  const server = await startServer(env)
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
  return {
    server,
    create: (name: string) =>
      fetch(`${server.url}/v1/pets`, { method: "POST", headers, body: JSON.stringify({ name, categoryId: 1 }) }),
    list: () => fetch(`${server.url}/v1/pets`, { headers }),
    get: (id: number) => fetch(`${server.url}/v1/pets/${id}`, { headers }),
    ready: () => fetch(`${server.url}/readyz`)
  }
}

/** What a read-only database answers: creates 503 named, reads 200, /readyz 200 naming it (every instance shares it). */
const expectReadOnly = async (service: Awaited<ReturnType<typeof serviceOn>>, petId: number) => {
  const refused = await service.create("refused")
  expect(refused.status).toBe(503)
  expect(refused.headers.get("retry-after")).toBe("5")
  expect(await refused.json()).toEqual(readOnlyBody)
  // Past several leases of the rate limit's shared bucket, which cannot be written.
  for (let i = 0; i < 10; i++) {
    const [list, get] = await Promise.all([service.list(), service.get(petId)])
    expect([list.status, get.status, await list.text(), (await get.json()).id]).toEqual([
      200,
      200,
      expect.any(String),
      petId
    ])
  }
  await within(1000, async () => {
    const ready = await service.ready()
    expect(ready.status).toBe(200)
    return (await ready.json()).database === "read_only"
  })
}

describe("a database made read-only (ALTER DATABASE … SET default_transaction_read_only = on)", () => {
  it("creates answer 503 database_read_only with Retry-After, lists and gets 200 (rate limits decided locally, logged and measured), /readyz 200 naming it; writable again, creates succeed within 2 s; a start on it fails in one line", async () => {
    await using database = await createTestDatabase()
    const name = new URL(database.url).pathname.slice(1)
    const metricsPort = freePort()
    const service = await serviceOn(database.url, { METRICS_PORT: String(metricsPort) })
    const cluster = await sharedPostgresUrl()
    const admin = (statement: string) => pgQuery(cluster, statement)
    try {
      const created = await service.create("before")
      expect(created.status).toBe(201)
      const petId = (await created.json()).id

      await admin(`ALTER DATABASE ${name} SET default_transaction_read_only = on`)
      // The setting holds for sessions opened from now on: end the service's.
      await admin(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}'`)
      await within(
        2000,
        async () => (await service.create("probe").then((r) => r.json())).code === "database_read_only"
      )
      await expectReadOnly(service, petId)
      const logs = service.server.logs().split("\n").filter((line) => line !== "").map((line) => JSON.parse(line))
      expect(
        logs.filter((line) => line.message === "rate limits decided locally: the shared buckets cannot be written")
      )
        .toEqual([expect.objectContaining({ logLevel: "WARN" })])
      const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text())
      expect(metrics).toMatch(/^petstore_rate_limit_local 1$/m)

      const start = await runCommand(["src/bin/main.ts"], {
        DATABASE_URL: database.url,
        PORT: String(freePort()),
        METRICS_PORT: "off"
      })
      expect(start.exitCode).toBe(1)
      const said = (start.stdout + start.stderr).split("\n").filter((line) =>
        line.includes(name) || line.includes("read-only")
      )
      expect(said).toEqual([
        expect.stringContaining(`at ${new URL(database.url).host} that DATABASE_URL names: it is read-only`)
      ])

      await admin(`ALTER DATABASE ${name} RESET default_transaction_read_only`)
      await within(2000, async () => (await service.create("after")).status === 201)
      await within(2000, async () =>
        /^petstore_rate_limit_local 0$/m.test(
          await service.list().then(() => fetch(`http://127.0.0.1:${metricsPort}/metrics`)).then((r) => r.text())
        ))
    } finally {
      await admin(`ALTER DATABASE ${name} RESET default_transaction_read_only`)
      await service.server.stop()
    }
  })
})

describe("the database's address moved to a hot standby not yet promoted", () => {
  it("creates answer 503 database_read_only, reads 200, /readyz 200 naming it; once promoted, creates and /readyz succeed within 2 s; a start on a standby fails in one line naming it", async () => {
    const primary = startPostgresCluster(freePort(), 100)
    const standbyPort = freePort()
    let standby: ReturnType<typeof startStandby> | undefined
    let service: Awaited<ReturnType<typeof serviceOn>> | undefined
    try {
      standby = startStandby(primary, standbyPort)
      await using address = await tcpForwarder(Number(new URL(primary.url).port))
      service = await serviceOn(`postgres://petstore@127.0.0.1:${address.port}/postgres`)
      const created = await service.create("before")
      expect(created.status).toBe(201)
      const petId = (await created.json()).id
      // What the service wrote (its schema, its key, the pet) replayed on the standby.
      const [{ lsn: written }] = await pgQuery<{ lsn: string }>(primary.url, "SELECT pg_current_wal_lsn() AS lsn")
      await within(
        5000,
        async () =>
          (await pgQuery<{ caught_up: boolean }>(
            standby!.url,
            "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS caught_up",
            [written]
          ))[0]!.caught_up
      )

      // The primary stops (its connections end) and the address points at the standby.
      address.moveTo(standbyPort)
      address.resetAll()
      await within(
        2000,
        async () => (await service!.create("probe").then((r) => r.json())).code === "database_read_only"
      )
      await expectReadOnly(service, petId)

      const start = await runCommand(["src/bin/main.ts"], {
        DATABASE_URL: standby.url,
        PORT: String(freePort()),
        METRICS_PORT: "off"
      })
      expect(start.exitCode).toBe(1)
      const said = (start.stdout + start.stderr).split("\n").filter((line) => line.includes(`127.0.0.1:${standbyPort}`))
      expect(said).toEqual([expect.stringContaining("that DATABASE_URL names: it is a standby (in recovery)")])

      standby.promote()
      await within(2000, async () => (await service!.create("after")).status === 201)
      await within(2000, async () => (await service!.ready().then((r) => r.json())).database === "ready")
    } finally {
      await service?.server.stop()
      standby?.stop()
      primary.stop()
    }
  })
})
