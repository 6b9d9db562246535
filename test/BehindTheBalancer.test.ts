import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { request as httpRequest } from "node:http"
import { startHaproxy } from "./support/Haproxy.js"
import { faultyPostgres } from "./support/PostgresFaults.js"
import { createKey, freePort, startServer } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

/** What a client got: the status (or the connection's error) and, for a 503, what it carried. */
interface Answer {
  readonly sentAt: number
  readonly status: number | string
  readonly contentType: string | null
  readonly retryAfter: string | null
  readonly code: string | undefined
}

const ask = async (url: string, init: RequestInit, sentAt: number): Promise<Answer> => {
  try {
    const response = await fetch(url, init)
    const text = await response.text()
    const contentType = response.headers.get("content-type")
    const code = contentType?.startsWith("application/json") && response.status >= 400
      ? JSON.parse(text).code
      : undefined
    return { sentAt, status: response.status, contentType, retryAfter: response.headers.get("retry-after"), code }
  } catch (error) {
    return { sentAt, status: String(error), contentType: null, retryAfter: null, code: undefined }
  }
}

/**
 * `perSecond` requests a second through the balancer, sent on schedule whatever the earlier ones
 * got (as independent clients do, so an outage does not slow the load down): lists, and creates
 * with an Idempotency-Key. Stops by itself after `seconds`; `answering` waits until `count` have
 * their answer.
 */
const openLoad = (url: string, key: string, perSecond: number, seconds: number) => {
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
  const startedAt = performance.now()
  const answers: Array<Promise<Answer>> = []
  let answered = 0
  const sending = (async () => {
    for (let n = 0; n < perSecond * seconds; n++) {
      const due = startedAt + (n * 1000) / perSecond
      const wait = due - performance.now()
      // Fixed: the load's schedule, kept whatever the answers.
      if (wait > 0) await Bun.sleep(wait)
      const sentAt = performance.now()
      answers.push(
        n % 4 === 0
          ? ask(`${url}/v1/pets`, {
            method: "POST",
            headers: { ...headers, "idempotency-key": `outage-${n}` },
            body: JSON.stringify({ name: `outage ${n}`, categoryId: 1 })
          }, sentAt)
          : ask(`${url}/v1/pets?limit=5`, { headers }, sentAt)
      )
      void answers.at(-1)!.then(() => answered++)
    }
  })()
  return {
    answering: (count: number) => waitFor(() => answered >= count, { what: `${count} answers through the balancer` }),
    finished: sending.then(() => Promise.all(answers))
  }
}

/** A request through the balancer from the loopback address `from`, as a client on another host. */
const statusFrom = (from: string, url: string, path: string, headers: Record<string, string>) =>
  new Promise<number>((resolve, reject) => {
    const { hostname, port } = new URL(url)
    const request = httpRequest(
      { host: hostname, port: Number(port), path, headers, localAddress: from },
      (response) => {
        response.resume()
        response.on("end", () => resolve(response.statusCode ?? 0))
      }
    )
    request.on("error", reject)
    request.end()
  })

/**
 * A backend that passes HAProxy's checks but closes every other connection without a word, as an
 * instance dying mid-request does; the first lines of what it was sent.
 */
const silentBackend = () => {
  const received: Array<string> = []
  const ready = JSON.stringify({ status: "ok", database: "ready" })
  const server = Bun.listen<{ answered: boolean }>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open: (socket) => void (socket.data = { answered: false }),
      data: (socket, chunk) => {
        if (socket.data.answered) return
        socket.data.answered = true
        const text = chunk.toString()
        if (text.startsWith("GET /readyz")) {
          socket.end(
            `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${ready.length}\r\nconnection: close\r\n\r\n${ready}`
          )
        } else {
          received.push(text.slice(0, text.indexOf("\r\n\r\n")))
          socket.end()
        }
      }
    }
  })
  return { address: `127.0.0.1:${server.port}`, received, stop: () => server.stop(true) }
}

/** The 503s an instance's metrics counted, every route but the probes'. */
const counted503 = async (metricsPort: number) => {
  const text = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text())
  return text.split("\n")
    .filter((line) =>
      line.startsWith("http_server_request_duration_seconds_count{") && line.includes(`http_response_status_code="503"`)
    )
    .filter((line) => !line.includes(`http_route="/readyz"`))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(" ") + 1)), 0)
}

describe("two instances on one PostgreSQL behind HAProxy (deploy/haproxy/haproxy.cfg)", () => {
  const metricsPorts = [freePort(), freePort()] as const
  const settings = {
    // HAProxy reaches the instances from 127.0.0.1: its X-Forwarded-For is believed.
    TRUSTED_PROXIES: "127.0.0.1",
    AUTH_FAILURES_PER_MINUTE: "4",
    RATE_LIMIT_PER_SECOND: "100000",
    RATE_LIMIT_BURST: "100000",
    // Short, so that the outage's answers come quickly (production: 5 s, 3 s, 3 s).
    REQUEST_TIMEOUT_SECONDS: "1",
    DATABASE_CONNECT_TIMEOUT_SECONDS: "0.5",
    DATABASE_STATEMENT_TIMEOUT_SECONDS: "0.5",
    LOG_LEVEL: "warn"
  }
  let postgres: ReturnType<typeof faultyPostgres> | undefined
  let key = ""
  let instances: Array<Awaited<ReturnType<typeof startServer>>> = []
  let balancer: Awaited<ReturnType<typeof startHaproxy>> | undefined

  beforeAll(async () => {
    postgres = faultyPostgres()
    const env = { ...settings, DATABASE_URL: postgres.url }
    key = await createKey(env)
    const ports = [freePort(), freePort()] as const
    instances = [
      await startServer({ ...env, METRICS_PORT: String(metricsPorts[0]) }, ports[0]),
      await startServer({ ...env, METRICS_PORT: String(metricsPorts[1]) }, ports[1])
    ]
    const started = await startHaproxy([`127.0.0.1:${ports[0]}`, `127.0.0.1:${ports[1]}`])
    balancer = started
    let states: Array<string> = []
    await waitFor(async () => {
      states = Object.values(await started.states())
      return states.filter((state) => state === "UP").length === 2
    }, { what: () => `the instances did not come UP: ${states.join(", ")}`, timeout: 20_000, interval: 50 })
  }, 60_000)

  afterAll(async () => {
    await balancer?.stop()
    for (const instance of instances) instance.proc.kill("SIGKILL")
    postgres?.[Symbol.dispose]()
  })

  it("failed authentications are limited per client: after 127.0.0.2's 30 bad keys, 127.0.0.3's next bad key is a 401, not a 429", async () => {
    const bad = { authorization: "Bearer ps_test_not-a-key" }
    const first: Array<number> = []
    for (let n = 0; n < 30; n++) first.push(await statusFrom("127.0.0.2", balancer!.url, "/v1/pets", bad))
    expect(first.slice(0, 4)).toEqual([401, 401, 401, 401])
    expect(new Set(first.slice(4))).toEqual(new Set([429]))
    expect(await statusFrom("127.0.0.3", balancer!.url, "/v1/pets", bad)).toBe(401)
  })

  it("a request an instance closed on without answering is sent again only when safe to repeat: a read or a create with an Idempotency-Key, never a create without one", async () => {
    const silent = silentBackend()
    const retrying = await startHaproxy([new URL(instances[0]!.url).host, silent.address])
    try {
      await waitFor(
        async () => Object.values(await retrying.states()).filter((state) => state === "UP").length === 2,
        { what: "the backends did not come UP", timeout: 20_000, interval: 50 }
      )
      const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
      const create = (n: number, idempotencyKey?: string) =>
        fetch(`${retrying.url}/v1/pets`, {
          method: "POST",
          headers: idempotencyKey === undefined ? headers : { ...headers, "idempotency-key": idempotencyKey },
          body: JSON.stringify({ name: `retried ${n}`, categoryId: 1 })
        }).then(async (response) => (await response.arrayBuffer(), response.status), () => "closed" as const)
      // Round robin: of two requests in a row, one meets the backend that closes.
      const statuses = {
        unkeyed: [] as Array<number | "closed">,
        keyed: [] as Array<number | "closed">,
        reads: [] as Array<number>
      }
      for (let n = 0; n < 4; n++) statuses.unkeyed.push(await create(n))
      for (let n = 0; n < 4; n++) statuses.keyed.push(await create(n, `retried-${n}-${Date.now()}`))
      for (let n = 0; n < 4; n++) {
        statuses.reads.push(
          await fetch(`${retrying.url}/v1/pets`, { headers }).then(async (r) => (await r.arrayBuffer(), r.status))
        )
      }
      const closedOn = silent.received.filter((head) => head.startsWith("POST") && !/^idempotency-key:/im.test(head))
      // Each create without a key that met the closing backend failed as it did (HAProxy closes the
      // client's connection too), and was sent nowhere else: its pet may exist there already.
      expect(closedOn.length).toBeGreaterThan(0)
      expect(statuses.unkeyed.filter((status) => status !== 201)).toHaveLength(closedOn.length)
      expect(statuses.unkeyed.filter((status) => status === 201)).toHaveLength(4 - closedOn.length)
      expect(statuses.keyed).toEqual([201, 201, 201, 201])
      expect(statuses.reads).toEqual([200, 200, 200, 200])
      expect(silent.received.filter((head) => head.startsWith("GET")).length).toBeGreaterThan(0)
    } finally {
      await retrying.stop()
      silent.stop()
    }
  })

  it(
    "PostgreSQL frozen 10 s under 200 requests a second: every answer 2xx or the service's JSON 503 with Retry-After, each counted; 2xx again within 5 s of its return; no instance taken out",
    async () => {
      const before = (await Promise.all(metricsPorts.map(counted503))).reduce((a, b) => a + b, 0)
      const watcher = balancer!.watch()
      const load = openLoad(balancer!.url, key, 200, 19)
      // About 2 s of the load answered before the fault.
      await load.answering(400)
      postgres!.freeze()
      // The outage itself lasts 10 s: a drill's duration, not a wait for a condition.
      await Bun.sleep(10_000)
      postgres!.thaw()
      const thawedAt = performance.now()
      const answers = await load.finished
      await watcher.stop()

      const failed = answers.filter((answer) => answer.status !== 200 && answer.status !== 201)
      expect(failed.length).toBeGreaterThan(50)
      const notTheService = failed.filter((answer) =>
        !(answer.status === 503 && answer.contentType?.startsWith("application/json") && answer.retryAfter !== null &&
          answer.code === "database_unavailable")
      )
      expect(notTheService, JSON.stringify(notTheService.slice(0, 5))).toEqual([])
      const lateFailures = failed.filter((answer) => answer.sentAt > thawedAt + 5000)
      expect(lateFailures, `${lateFailures.length} failed more than 5 s after the database returned`).toEqual([])
      expect(answers.filter((answer) => answer.sentAt > thawedAt + 5000).length).toBeGreaterThan(100)
      expect([...new Set(Object.values(watcher.seen).flatMap((states) => [...states]))]).toEqual(["UP"])

      // An answer is counted as it is written: the last of them a moment after the client has it.
      const counted = async () => (await Promise.all(metricsPorts.map(counted503))).reduce((a, b) => a + b, 0) - before
      await waitFor(async () => (await counted()) === failed.length, {
        what: "every 503 counted",
        timeout: 2000,
        interval: 50
      }).catch(() => undefined)
      expect(await counted()).toBe(failed.length)
    },
    60_000
  )
})
