import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { spawnSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { connect } from "node:net"
import { join } from "node:path"
import { startPostgresCluster } from "./support/PostgresCluster.js"
import { openSocket, rawGet } from "./support/RawSocket.js"
import { createKey, freePort, isRunning, startServer, temporaryFolder } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

// Short, so that the bound is seen without waiting out the production default of 10 s. No grace
// where the grace is not the subject: the bound is then the drain + 2 s.
const drainSeconds = 1
const boundMillis = (drainSeconds + 2) * 1000
const noGrace = { STOP_GRACE_SECONDS: "0" }

/**
 * Requests one after another on keep-alive connections until `stop` is called (which answers how
 * many were answered); `flowing` waits until some have been.
 */
const traffic = (url: string, key: string) => {
  let running = true
  let answered = 0
  const client = async () => {
    while (running) {
      await fetch(`${url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } }).then(
        async (response) => {
          await response.arrayBuffer()
          answered++
        },
        () => undefined
      )
      // Fixed: paces each client, so that four of them load the server without taking every core.
      await Bun.sleep(5)
    }
  }
  const clients = Array.from({ length: 4 }, client)
  const stop = async () => {
    running = false
    await Promise.all(clients)
    return answered
  }
  const flowing = () => waitFor(() => answered >= 20, { what: "20 requests of the traffic answered" })
  return Object.assign(stop, { flowing })
}

/** Milliseconds from the signal (SIGTERM unless named) to the process's exit, and its exit code. */
const timeStop = async (server: { readonly proc: Bun.Subprocess }, signal: NodeJS.Signals = "SIGTERM") => {
  const sentAt = performance.now()
  server.proc.kill(signal)
  const code = await server.proc.exited
  return { millis: performance.now() - sentAt, code }
}

const workerPids = (logs: string) =>
  logs.split("\n").filter((line) => line.includes(`"worker started"`)).map((line) =>
    JSON.parse(line).annotations.pid as number
  )

/** Waits until the server, its metrics on `metricsPort`, serves at least `count` requests at once. */
const servingAtLeast = (metricsPort: string, count: number) =>
  waitFor(async () => {
    const text = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text(), () => "")
    return Number(/^http_server_active_requests (\S+)$/m.exec(text)?.[1] ?? 0) >= count
  }, { what: `${count} requests in flight` })

const bothListening = (server: { readonly logs: () => string }) =>
  waitFor(() => server.logs().split("\n").filter((line) => line.includes(`"listening"`)).length === 2, {
    what: "both workers listening"
  })

interface Answer {
  readonly sentAt: number
  readonly status: number
  readonly connection: string | null
  readonly code?: string | undefined
}

/**
 * From the signal on, a request every 20 ms, each on a new connection, alternating `/livez`, the
 * list and `/readyz`, until one finds no listener; what each got, with when it was sent from the
 * signal, and when the first refusal came.
 */
const callThroughTheStop = async (url: string, key: string, signalledAt: number) => {
  const answers: Array<Answer & { readonly path: string }> = []
  const paths = ["/livez", "/v1/pets", "/readyz"]
  for (let n = 0; performance.now() - signalledAt < 30_000; n++) {
    const path = paths[n % paths.length]!
    const sentAt = performance.now() - signalledAt
    const outcome = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${key}` }, keepalive: false })
      .then(
        async (response) => ({
          status: response.status,
          connection: response.headers.get("connection"),
          code: response.status === 503
            ? ((await response.json()) as { code: string }).code
            : (await response.arrayBuffer(), undefined)
        }),
        () => undefined
      )
    if (outcome === undefined) return { answers, refusedAt: sentAt }
    answers.push({ path, sentAt, ...outcome })
    // Fixed: the calls' pace through the stop is what the test reads.
    await Bun.sleep(20)
  }
  throw new Error("the listener never closed")
}

const graceSeconds = 1.5

describe(`the stop a load balancer expects (STOP_GRACE_SECONDS=${graceSeconds})`, () => {
  it("on SIGTERM: /readyz fails at once, the rest is served with Connection: close for the grace, then the listener closes and the process exits 0 with nothing in flight", async () => {
    using folder = temporaryFolder()
    // A drain far longer than the grace: an exit before it shows that the stop waits for no quiet moment.
    const env = {
      DATABASE_URL: join(folder.path, "petstore.db"),
      STOP_GRACE_SECONDS: String(graceSeconds),
      DRAIN_TIMEOUT_SECONDS: "10"
    }
    const key = await createKey(env)
    const server = await startServer(env)
    // A keep-alive connection, idle when the listener closes.
    const idle = await openSocket(server.url)
    try {
      const closed = new Promise<void>((resolve) => idle.once("close", () => resolve()))
      let answered = false
      idle.on("data", () => answered = true)
      idle.write(rawGet("/livez"))
      await waitFor(() => answered, { what: "the keep-alive connection's first answer" })
      const signalledAt = performance.now()
      server.proc.kill("SIGTERM")
      const { answers, refusedAt } = await callThroughTheStop(server.url, key, signalledAt)
      // Until the signal is handled, /readyz may still answer 200; from its first 503 on, every answer is as follows.
      const stopping = answers.slice(answers.findIndex((answer) => answer.path === "/readyz" && answer.status === 503))
      expect(stopping.length).toBeGreaterThan(10)
      expect(stopping[0]!.sentAt).toBeLessThan(500)
      for (const answer of stopping) {
        expect(answer, "the grace").toMatchObject(
          answer.path === "/readyz"
            ? { status: 503, code: "shutting_down", connection: "close" }
            : { status: 200, connection: "close" }
        )
      }
      // No connection refused before the grace has run from the signal.
      expect(refusedAt).toBeGreaterThanOrEqual(graceSeconds * 1000 - 50)
      await closed
      const code = await server.proc.exited
      expect(code).toBe(0)
      expect(performance.now() - signalledAt).toBeLessThan((graceSeconds + 2) * 1000)
      const logs = server.logs()
      expect(logs).toContain(`"message":"stopping: not ready; serving on for the grace"`)
      expect(logs).toContain(`"message":"stopping: finishing the requests in flight"`)
    } finally {
      idle.destroy()
      server.proc.kill("SIGKILL")
    }
  })

  it("with WORKERS=2: every worker follows the same steps, and the group is gone within grace + drain + 2 s", async () => {
    using folder = temporaryFolder()
    const env = {
      DATABASE_URL: join(folder.path, "petstore.db"),
      STOP_GRACE_SECONDS: String(graceSeconds),
      DRAIN_TIMEOUT_SECONDS: String(drainSeconds)
    }
    const key = await createKey(env)
    const server = await startServer({ ...env, WORKERS: "2" })
    try {
      await bothListening(server)
      const workers = workerPids(server.logs())
      const signalledAt = performance.now()
      server.proc.kill("SIGTERM")
      const { answers, refusedAt } = await callThroughTheStop(server.url, key, signalledAt)
      const stopping = answers.slice(answers.findIndex((answer) => answer.path === "/readyz" && answer.status === 503))
      for (const answer of stopping) {
        expect(answer).toMatchObject(
          answer.path === "/readyz"
            ? { status: 503, code: "shutting_down", connection: "close" }
            : { status: 200, connection: "close" }
        )
      }
      // Readiness answered 503 through the grace; that both workers began is in their log lines (below),
      // not in how many calls a loaded machine fits into the grace.
      expect(stopping.filter((answer) => answer.path === "/readyz").length).toBeGreaterThan(1)
      expect(refusedAt).toBeGreaterThanOrEqual(graceSeconds * 1000 - 50)
      expect(await server.proc.exited).toBe(0)
      expect(performance.now() - signalledAt).toBeLessThan((graceSeconds + drainSeconds + 2) * 1000)
      expect(workers.filter(isRunning)).toEqual([])
      expect(
        server.logs().split("\n").filter((line) => line.includes(`"stopping: not ready; serving on for the grace"`))
          .length
      ).toBe(2)
    } finally {
      server.proc.kill("SIGKILL")
      for (const pid of workerPids(server.logs())) if (isRunning(pid)) process.kill(pid, "SIGKILL")
    }
  })
})

describe(`a stop ends within the grace + the drain time + 2 s (DRAIN_TIMEOUT_SECONDS=${drainSeconds})`, () => {
  it("under continuous keep-alive traffic, and exits 0", async () => {
    using folder = temporaryFolder()
    const env = {
      ...noGrace,
      DATABASE_URL: join(folder.path, "petstore.db"),
      DRAIN_TIMEOUT_SECONDS: String(drainSeconds)
    }
    const server = await startServer(env)
    try {
      const stopTraffic = traffic(server.url, await createKey(env))
      await stopTraffic.flowing()
      const { code, millis } = await timeStop(server)
      expect(await stopTraffic()).toBeGreaterThan(0)
      expect(millis).toBeLessThan(boundMillis)
      expect(code).toBe(0)
    } finally {
      server.proc.kill("SIGKILL")
    }
  })

  it("while a request is still running at the drain's end (its body never finishes)", async () => {
    using folder = temporaryFolder()
    const env = {
      ...noGrace,
      DATABASE_URL: join(folder.path, "petstore.db"),
      DRAIN_TIMEOUT_SECONDS: String(drainSeconds),
      METRICS_PORT: String(freePort())
    }
    const server = await startServer(env)
    const key = await createKey(env)
    const socket = connect(Number(new URL(server.url).port), "127.0.0.1")
    try {
      await new Promise((resolve) => socket.once("connect", resolve))
      socket.write(
        `POST /v1/pets HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"name":`
      )
      await servingAtLeast(env.METRICS_PORT, 1)
      const { millis } = await timeStop(server)
      expect(millis).toBeGreaterThanOrEqual(drainSeconds * 1000 - 50)
      expect(millis).toBeLessThan(boundMillis)
    } finally {
      socket.destroy()
      server.proc.kill("SIGKILL")
    }
  })

  it("with WORKERS=2 under traffic: the supervisor and every worker are gone", async () => {
    using folder = temporaryFolder()
    const env = {
      ...noGrace,
      DATABASE_URL: join(folder.path, "petstore.db"),
      DRAIN_TIMEOUT_SECONDS: String(drainSeconds)
    }
    const key = await createKey(env)
    const server = await startServer({ ...env, WORKERS: "2" })
    try {
      await bothListening(server)
      const workers = workerPids(server.logs())
      const stopTraffic = traffic(server.url, key)
      await stopTraffic.flowing()
      const { millis } = await timeStop(server)
      await stopTraffic()
      expect(millis).toBeLessThan(boundMillis)
      expect(workers.filter(isRunning)).toEqual([])
    } finally {
      server.proc.kill("SIGKILL")
      for (const pid of workerPids(server.logs())) if (isRunning(pid)) process.kill(pid, "SIGKILL")
    }
  })

  it("on SIGHUP as on SIGTERM: logged, drained and exit 0, for one process and for a supervisor with its workers", async () => {
    using folder = temporaryFolder()
    const env = {
      ...noGrace,
      DATABASE_URL: join(folder.path, "petstore.db"),
      DRAIN_TIMEOUT_SECONDS: String(drainSeconds)
    }
    const key = await createKey(env)
    const single = await startServer(env)
    try {
      const stopTraffic = traffic(single.url, key)
      await stopTraffic.flowing()
      const { code, millis } = await timeStop(single, "SIGHUP")
      expect(await stopTraffic()).toBeGreaterThan(0)
      expect(code).toBe(0)
      expect(millis).toBeLessThan(boundMillis)
      expect(single.logs()).toContain(`"message":"stopping: finishing the requests in flight"`)
    } finally {
      single.proc.kill("SIGKILL")
    }
    const supervisor = await startServer({ ...env, WORKERS: "2" })
    try {
      await bothListening(supervisor)
      const workers = workerPids(supervisor.logs())
      const { code, millis } = await timeStop(supervisor, "SIGHUP")
      expect(code).toBe(0)
      expect(millis).toBeLessThan(boundMillis)
      expect(workers.filter(isRunning)).toEqual([])
      expect(
        supervisor.logs().split("\n").filter((line) => line.includes(`"stopping: finishing the requests in flight"`))
          .length
      ).toBe(2)
    } finally {
      supervisor.proc.kill("SIGKILL")
      for (const pid of workerPids(supervisor.logs())) if (isRunning(pid)) process.kill(pid, "SIGKILL")
    }
  })

  it("with WORKERS=2 and a worker that does not stop (SIGSTOP): the supervisor kills it in time", async () => {
    using folder = temporaryFolder()
    const env = {
      ...noGrace,
      DATABASE_URL: join(folder.path, "petstore.db"),
      DRAIN_TIMEOUT_SECONDS: String(drainSeconds)
    }
    const server = await startServer({ ...env, WORKERS: "2" })
    try {
      await bothListening(server)
      const workers = workerPids(server.logs())
      process.kill(workers[0]!, "SIGSTOP")
      const { millis } = await timeStop(server)
      expect(millis).toBeLessThan(boundMillis)
      await waitFor(() => workers.every((pid) => !isRunning(pid)), { what: "every worker gone" })
    } finally {
      server.proc.kill("SIGKILL")
      for (const pid of workerPids(server.logs())) if (isRunning(pid)) process.kill(pid, "SIGKILL")
    }
  })

  it("with PostgreSQL stopped (SIGSTOP to the postmaster and its backends) while requests wait on it", async () => {
    const cluster = startPostgresCluster(freePort())
    const postmaster = Number(readFileSync(join(cluster.dataDirectory, "postmaster.pid"), "utf8").split("\n")[0])
    const processes = () => [
      postmaster,
      ...spawnSync("pgrep", ["-P", String(postmaster)], { encoding: "utf8" }).stdout.split("\n").filter((l) => l !== "")
        .map(Number)
    ]
    const env = { ...noGrace, DATABASE_URL: cluster.url, DRAIN_TIMEOUT_SECONDS: String(drainSeconds) }
    const server = await startServer(env)
    let stopped: Array<number> = []
    try {
      const stopTraffic = traffic(server.url, await createKey(env))
      await stopTraffic.flowing()
      stopped = processes()
      for (const pid of stopped) process.kill(pid, "SIGSTOP")
      // Fixed: the fault held a while, so that the traffic's requests are waiting on it at the stop.
      await Bun.sleep(300)
      const { millis } = await timeStop(server)
      expect(millis).toBeLessThan(boundMillis)
      for (const pid of stopped) process.kill(pid, "SIGCONT")
      stopped = []
      await stopTraffic()
    } finally {
      for (const pid of stopped) process.kill(pid, "SIGCONT")
      server.proc.kill("SIGKILL")
      cluster.stop()
    }
  })

  it("with SQLite's write lock held by another process while creates wait for it", async () => {
    using folder = temporaryFolder()
    const path = join(folder.path, "petstore.db")
    // A lock wait far longer than the drain: the drain must cut the waits.
    const env = {
      ...noGrace,
      DATABASE_URL: path,
      DRAIN_TIMEOUT_SECONDS: String(drainSeconds),
      DATABASE_STATEMENT_TIMEOUT_SECONDS: "9",
      METRICS_PORT: String(freePort())
    }
    const key = await createKey(env)
    const server = await startServer(env)
    const other = new Database(path)
    try {
      other.exec("BEGIN IMMEDIATE")
      const creates = Array.from({ length: 4 }, (_, n) =>
        fetch(`${server.url}/v1/pets`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ name: `waiting ${n}`, categoryId: 1 })
        }).then((response) => response.status, () => 0))
      await servingAtLeast(env.METRICS_PORT, creates.length)
      const { millis } = await timeStop(server)
      expect(millis).toBeLessThan(boundMillis)
      // Answered 503 at the drain's end, or cut off with the process: none was stored.
      for (const status of await Promise.all(creates)) expect([0, 503]).toContain(status)
      other.exec("ROLLBACK")
      expect(other.query("SELECT count(*) AS n FROM pets").get()).toEqual({ n: 0 })
    } finally {
      other.close()
      server.proc.kill("SIGKILL")
    }
  })
})
