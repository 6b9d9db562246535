import { describe, expect, it } from "@effect/vitest"
import pg from "pg"
import { faultyPostgres } from "./support/PostgresFaults.js"
import { openSocket } from "./support/RawSocket.js"
import { createKey, freePort, runCommand, startServer } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

// Short, so that the bounds are seen without waiting out the production defaults (5 s, 3 s, 30 s).
const requestTimeoutSeconds = 1
const timeouts = {
  REQUEST_TIMEOUT_SECONDS: String(requestTimeoutSeconds),
  DATABASE_CONNECT_TIMEOUT_SECONDS: "0.5",
  DATABASE_STATEMENT_TIMEOUT_SECONDS: "0.5"
}
const unavailableCodes = ["database_unavailable"]

const timed = async (request: Promise<Response>) => {
  const startedAt = performance.now()
  const response = await request
  const body = await response.text()
  return { status: response.status, headers: response.headers, body, millis: performance.now() - startedAt }
}

/**
 * Waits, up to `millis`, for `/readyz` to name the database `state`. Every answer meanwhile is a
 * 200: a fault of the database every instance shares leaves each of them in its balancer's pool.
 */
const untilReadinessNames = async (url: string, state: string, millis = 1000) => {
  let named = ""
  await waitFor(async () => {
    const response = await fetch(`${url}/readyz`)
    const body = await response.json()
    expect(response.status, JSON.stringify(body)).toBe(200)
    named = body.database
    return named === state
  }, { what: () => `/readyz still names the database ${named}`, timeout: millis, interval: 50 })
}

const requestLines = (logs: string) =>
  logs.split("\n").filter((line) => line.includes(`"message":"request"`)).map((line) => JSON.parse(line).annotations)

describe("PostgreSQL faults under requests", () => {
  it("stopped (SIGSTOP): API requests answer 503 with Retry-After within the deadline, /readyz 200 naming the database unavailable within 1 s, /livez at once; all recover after SIGCONT", async () => {
    using postgres = faultyPostgres()
    const env = { DATABASE_URL: postgres.url, ...timeouts }
    const key = await createKey(env, "faults")
    const server = await startServer(env)
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
    const create = (name: string) =>
      fetch(`${server.url}/v1/pets`, { method: "POST", headers, body: JSON.stringify({ name, categoryId: 1 }) })
    try {
      const acknowledged: Array<number> = []
      for (const name of ["a", "b", "c"]) {
        const response = await create(name)
        expect(response.status).toBe(201)
        acknowledged.push((await response.json()).id)
      }

      postgres.freeze()
      const [list, created, ready, live] = await Promise.all([
        timed(fetch(`${server.url}/v1/pets`, { headers })),
        timed(create("during")),
        timed(fetch(`${server.url}/readyz`)),
        timed(fetch(`${server.url}/livez`))
      ])
      expect(live.status).toBe(200)
      expect(live.millis).toBeLessThan(250)
      expect(ready.status).toBe(200)
      expect(ready.millis).toBeLessThan(1000)
      await untilReadinessNames(server.url, "unavailable")
      for (const answer of [list, created]) {
        expect(answer.status).toBe(503)
        expect(JSON.parse(answer.body)).toEqual({
          code: expect.toSatisfy((code: string) => unavailableCodes.includes(code)),
          message: expect.stringContaining("retry"),
          status: 503
        })
        expect(answer.headers.get("retry-after")).toBe("1")
        // The deadline, or a database call's own timeout (+ 0.5 s for the client's) when the
        // deadline finds one being cancelled.
        expect(answer.millis).toBeLessThan(requestTimeoutSeconds * 1000 + 500 + 500 + 500)
      }
      // A request's line is written after its answer: give it a moment.
      const statuses = () =>
        requestLines(server.logs()).filter((line) => line.path === "/v1/pets").map((line) => line.status)
      await waitFor(() => statuses().length >= 5, { what: "five request lines", timeout: 1000 }).catch(() => undefined)
      expect(statuses()).toEqual([201, 201, 201, 503, 503])

      postgres.thaw()
      await untilReadinessNames(server.url, "ready")
      const after = await fetch(`${server.url}/v1/pets?limit=100`, { headers }).then((r) => r.json())
      const ids = after.map((pet: { id: number }) => pet.id)
      expect(ids).toEqual(expect.arrayContaining(acknowledged))
      expect(new Set(ids).size).toBe(ids.length)
    } finally {
      postgres.thaw()
      await server.stop()
    }
  })

  it("restarted under traffic: only 200, 201 or 503 with Retry-After, never 500; every acknowledged create is kept, none twice", async () => {
    using postgres = faultyPostgres()
    const env = { DATABASE_URL: postgres.url, ...timeouts, RATE_LIMIT_PER_SECOND: "100000", RATE_LIMIT_BURST: "100000" }
    const key = await createKey(env, "faults")
    const server = await startServer(env)
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
    const acknowledged: Array<number> = []
    const statuses = new Map<number, number>()
    let running = true
    const client = async (n: number) => {
      for (let i = 0; running; i++) {
        const response = await fetch(
          `${server.url}/v1/pets${i % 2 === 0 ? "" : "?limit=5"}`,
          i % 2 === 0
            ? { method: "POST", headers, body: JSON.stringify({ name: `c${n}.${i}`, categoryId: n }) }
            : { headers }
        ).catch(() => undefined)
        if (response === undefined) continue
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1)
        const body = await response.json()
        if (response.status === 201) acknowledged.push(body.id)
        if (response.status === 503) {
          expect(response.headers.get("retry-after")).toBe("1")
          expect(unavailableCodes).toContain(body.code)
        }
      }
    }
    try {
      const clients = Array.from({ length: 4 }, (_, n) => client(n))
      await waitFor(() => statuses.has(201), { what: "a create acknowledged before the restart" })
      postgres.restart()
      // Watched through the restart until the service is back: five more creates acknowledged.
      const acknowledgedAtRestart = acknowledged.length
      await waitFor(() => acknowledged.length >= acknowledgedAtRestart + 5, { what: "creates acknowledged again" })
      running = false
      await Promise.all(clients)
      expect([...statuses.keys()].every((status) => [200, 201, 503].includes(status)), JSON.stringify([...statuses]))
        .toBe(true)
      expect(statuses.get(201)).toBeGreaterThan(0)
      const stored = new Set<number>()
      for (let cursor: string | undefined, first = true; first || cursor !== undefined; first = false) {
        const response = await fetch(
          `${server.url}/v1/pets?limit=100${cursor === undefined ? "" : `&cursor=${cursor}`}`,
          { headers }
        )
        for (const pet of await response.json()) {
          expect(stored.has(pet.id)).toBe(false)
          stored.add(pet.id)
        }
        cursor = /cursor=([^&>]+)/.exec(response.headers.get("link") ?? "")?.[1]
      }
      expect(acknowledged.filter((id) => !stored.has(id))).toEqual([])
    } finally {
      running = false
      await server.stop()
    }
  })
})

const filler = "petstore-faults-filler"

/**
 * Ends the service's connections and takes every free slot of PostgreSQL into `taken`, as other
 * clients would. The service keeps reading in the background (the read-only flag once a second),
 * so it may take a slot freed here before the filling ends: then its connections are ended again
 * and their slots taken, until a round finds no connection of the service and no free slot.
 */
const takeEverySlot = async (url: string, taken: Array<pg.Client>) => {
  const connect = async () => {
    const client = new pg.Client({ connectionString: url, application_name: filler })
    const refused = await client.connect().then(() => false, (error: { code?: string }) => error.code === "53300")
    if (!refused) taken.push(client)
    expect(taken.length).toBeLessThan(20)
    return !refused
  }
  expect(await connect()).toBe(true)
  const admin = taken.at(-1)!
  const services = `FROM pg_stat_activity WHERE backend_type = 'client backend' AND application_name <> '${filler}'`
  const serviceConnections = async () => Number((await admin.query(`SELECT count(*) AS n ${services}`)).rows[0].n)
  // Rounds until one finds the service holding no session and no slot free.
  await waitFor(async () => {
    const ended = await serviceConnections() > 0
    await waitFor(async () => {
      await admin.query(`SELECT pg_terminate_backend(pid) ${services}`)
      return await serviceConnections() === 0
    }, { what: "the service's sessions ended", interval: 10 })
    let filled = 0
    while (await connect()) filled++
    return !ended && filled === 0
  }, { what: "the service kept taking freed connection slots", interval: 50 })
}

describe("PostgreSQL out of connections (max_connections taken by other clients)", () => {
  it("requests answer 503 with Retry-After, /readyz 200 naming the database unavailable within 1 s, never 500; both recover within 1 s of connections freed", async () => {
    using postgres = faultyPostgres(12)
    const env = { DATABASE_URL: postgres.url, ...timeouts }
    const key = await createKey(env, "faults")
    const server = await startServer(env)
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
    const others: Array<pg.Client> = []
    try {
      expect((await fetch(`${server.url}/v1/pets`, { headers })).status).toBe(200)
      await takeEverySlot(postgres.url, others)
      const answers = await Promise.all([
        ...Array.from({ length: 4 }, () => timed(fetch(`${server.url}/v1/pets`, { headers }))),
        timed(
          fetch(`${server.url}/v1/pets`, {
            method: "POST",
            headers,
            body: JSON.stringify({ name: "full", categoryId: 1 })
          })
        )
      ])
      for (const answer of answers) {
        expect(answer.status, answer.body).toBe(503)
        expect(JSON.parse(answer.body).code).toBe("database_unavailable")
        expect(answer.headers.get("retry-after")).toBe("1")
        expect(answer.millis).toBeLessThan(requestTimeoutSeconds * 1000 + 500)
      }
      const ready = await timed(fetch(`${server.url}/readyz`))
      expect(ready.status).toBe(200)
      expect(ready.millis).toBeLessThan(1000)
      await untilReadinessNames(server.url, "unavailable")

      await Promise.all(others.splice(0).map((other) => other.end()))
      await untilReadinessNames(server.url, "ready")
      expect((await fetch(`${server.url}/v1/pets`, { headers })).status).toBe(200)
      const statuses = requestLines(server.logs()).filter((line) => line.path === "/v1/pets").map((line) => line.status)
      expect(statuses.filter((status) => status === 500)).toEqual([])
    } finally {
      await Promise.all(others.map((other) => other.end().catch(() => undefined)))
      await server.stop()
    }
  })
})

describe("an idempotent create cut off by an outage", () => {
  it("its key reserved just before PostgreSQL stopped: retried after, the same key answers one pet within the deadline + 1 s, never two, no 409 past that", async () => {
    using postgres = faultyPostgres()
    const env = { DATABASE_URL: postgres.url, ...timeouts }
    const key = await createKey(env, "faults")
    const server = await startServer(env)
    const body = JSON.stringify({ name: "Blip", categoryId: 7 })
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json", "idempotency-key": "blip" }
    try {
      // The key is reserved before the body is read: send the head, let the reservation commit,
      // stop PostgreSQL, then send the body.
      const socket = await openSocket(server.url)
      const answer = new Promise<string>((resolve) => {
        let text = ""
        socket.on("data", (chunk) => {
          text += chunk.toString()
          if (/\r\n\r\n[\s\S]*\}$/.test(text)) resolve(text)
        })
        socket.on("close", () => resolve(text))
      })
      socket.write(
        `POST /v1/pets HTTP/1.1\r\nhost: 127.0.0.1\r\n${
          Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join("")
        }` +
          `content-length: ${body.length}\r\n\r\n`
      )
      const reserved = new pg.Client({ connectionString: postgres.url })
      await reserved.connect()
      try {
        await waitFor(
          async () =>
            (await reserved.query(`SELECT 1 FROM idempotency_keys WHERE idempotency_key = 'blip'`)).rowCount === 1,
          { what: "the idempotency key reserved" }
        )
      } finally {
        await reserved.end()
      }
      postgres.freeze()
      socket.write(body)
      const first = await answer
      socket.destroy()
      expect(first).toMatch(/^HTTP\/1\.1 503/)
      expect(first.toLowerCase()).toContain("retry-after: 1")
      postgres.thaw()
      const answeredAt = performance.now()

      const bound = (requestTimeoutSeconds + 1) * 1000
      const retried = await waitFor(async () => {
        const response = await fetch(`${server.url}/v1/pets`, { method: "POST", headers, body })
        if (response.status === 201) return response
        expect([409, 503]).toContain(response.status)
        await response.text()
        return undefined
      }, { what: "the retried create answered 201", timeout: bound - (performance.now() - answeredAt), interval: 50 })
      const pet = await retried.json()
      const again = await fetch(`${server.url}/v1/pets`, { method: "POST", headers, body })
      expect(again.status).toBe(201)
      expect(await again.json()).toEqual(pet)
      const stored = await fetch(`${server.url}/v1/pets?limit=100`, { headers }).then((r) => r.json())
      expect(stored.filter((each: { name: string }) => each.name === "Blip")).toEqual([pet])
    } finally {
      postgres.thaw()
      await server.stop()
    }
  })
})

describe("a request waiting for a pool connection while PostgreSQL is stopped (SIGSTOP)", () => {
  it("is answered 503 database_unavailable with Retry-After at the connect timeout, as the requests holding the pool are; none request_timeout", async () => {
    using postgres = faultyPostgres()
    // A statement left at its bound (2.5 s) and a connect (1 s) after it pass the deadline (3 s):
    // a wait that lasted until a session came back would be answered request_timeout.
    const connectMillis = 1000
    const statementMillis = 2000
    const statementBoundMillis = statementMillis + 500
    const env = {
      DATABASE_URL: postgres.url,
      REQUEST_TIMEOUT_SECONDS: "3",
      DATABASE_CONNECT_TIMEOUT_SECONDS: String(connectMillis / 1000),
      DATABASE_STATEMENT_TIMEOUT_SECONDS: String(statementMillis / 1000),
      RATE_LIMIT_PER_SECOND: "100000",
      RATE_LIMIT_BURST: "100000"
    }
    const poolSize = 20
    const key = await createKey(env, "faults")
    const metricsPort = freePort()
    const server = await startServer({ ...env, METRICS_PORT: String(metricsPort) })
    const list = () => timed(fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } }))
    const connectionsUsed = async () => {
      const series = `db_client_connections_usage{state="used"} `
      const exposition = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text())
      return Number(exposition.split("\n").find((line) => line.startsWith(series))?.slice(series.length) ?? 0)
    }
    /** Until every session of the pool is lent, within `millis`. */
    const poolTaken = async (millis: number) => {
      await waitFor(async () => (await connectionsUsed()) >= poolSize, {
        what: `the pool's ${poolSize} sessions all lent`,
        timeout: millis,
        interval: 20
      })
    }
    const admin = new pg.Client({ connectionString: postgres.url })
    await admin.connect()
    try {
      // Every session of the pool opened first: lists wait on the locked table, one session each.
      await admin.query("BEGIN")
      await admin.query("LOCK TABLE pets IN ACCESS EXCLUSIVE MODE")
      const warming = Array.from({ length: poolSize }, list)
      await poolTaken(1500)
      await admin.query("ROLLBACK")
      for (const answer of await Promise.all(warming)) expect(answer.status, answer.body).toBe(200)
      const open = await admin.query(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'petstore'"
      )
      expect(open.rows[0].n).toBe(poolSize)

      postgres.freeze()
      // Each takes an open session and sends its first statement, which is never answered.
      const holding = Array.from({ length: poolSize }, list)
      await poolTaken(1000)
      const waiting = await Promise.all(Array.from({ length: 3 }, list))
      const held = await Promise.all(holding)
      for (const answer of [...waiting, ...held]) {
        expect(answer.status, answer.body).toBe(503)
        expect(JSON.parse(answer.body).code).toBe("database_unavailable")
        expect(answer.headers.get("retry-after")).toBe("1")
      }
      for (const answer of waiting) {
        expect(answer.millis).toBeGreaterThanOrEqual(connectMillis - 50)
        // Well before a session comes back (2.5 s), let alone a connect after it.
        expect(answer.millis).toBeLessThan(connectMillis + 1000)
      }
      for (const answer of held) expect(answer.millis).toBeLessThan(statementBoundMillis + 1000)
      const gaveUp = server.logs().split("\n").filter((line) =>
        line.includes(`"database unavailable"`) && line.includes("came free within") &&
        line.includes("DATABASE_CONNECT_TIMEOUT_SECONDS")
      )
      expect(gaveUp).toHaveLength(waiting.length)
    } finally {
      postgres.thaw()
      await admin.end().catch(() => undefined)
      await server.stop()
    }
  })
})

describe("the pets table locked by another session (LOCK TABLE pets IN ACCESS EXCLUSIVE MODE)", () => {
  it("/readyz answers 200 naming the database unavailable within 1 s and API requests 503 within the statement timeout; both recover within 1 s of the release", async () => {
    using postgres = faultyPostgres()
    const env = { DATABASE_URL: postgres.url, ...timeouts }
    const key = await createKey(env, "faults")
    const server = await startServer(env)
    const headers = { authorization: `Bearer ${key}` }
    const locker = Bun.spawn(["psql", postgres.url, "-v", "ON_ERROR_STOP=1"], {
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe"
    })
    try {
      locker.stdin.write("BEGIN; LOCK TABLE pets IN ACCESS EXCLUSIVE MODE; SELECT 'locked';\n")
      locker.stdin.flush()
      const reader = locker.stdout.getReader()
      for (let seen = ""; !seen.includes("locked");) seen += new TextDecoder().decode((await reader.read()).value)
      const [ready, list] = await Promise.all([
        timed(fetch(`${server.url}/readyz`)),
        timed(fetch(`${server.url}/v1/pets`, { headers }))
      ])
      expect(ready.status).toBe(200)
      expect(ready.millis).toBeLessThan(1000)
      await untilReadinessNames(server.url, "unavailable")
      expect(list.status).toBe(503)
      expect(list.headers.get("retry-after")).toBe("1")
      expect(list.millis).toBeLessThan(requestTimeoutSeconds * 1000 + 1000)

      locker.stdin.write("ROLLBACK;\n")
      locker.stdin.flush()
      await untilReadinessNames(server.url, "ready")
      expect((await fetch(`${server.url}/v1/pets`, { headers })).status).toBe(200)
    } finally {
      locker.kill()
      await server.stop()
    }
  })
})

describe("a start against PostgreSQL keeps its bounds", () => {
  it("a database that refuses connections is retried, each retry logged, then exit 1 naming host and port", async () => {
    const port = freePort()
    const startedAt = performance.now()
    const result = await runCommand(["src/bin/main.ts"], {
      DATABASE_URL: `postgres://petstore:s3cret-pw@127.0.0.1:${port}/petstore`,
      DATABASE_START_TIMEOUT_SECONDS: "2",
      PORT: String(freePort()),
      METRICS_PORT: "off"
    })
    const millis = performance.now() - startedAt
    const output = result.stdout + result.stderr
    expect(result.exitCode).toBe(1)
    // The 2 s of retries, and Bun's own start.
    expect(millis).toBeLessThan(8000)
    expect(output.split("\n").filter((line) => line.includes("refuses connections; retrying")).length)
      .toBeGreaterThanOrEqual(2)
    expect(output).toContain(`127.0.0.1:${port}`)
    expect(output).not.toContain("s3cret-pw")
  })

  it("a database that accepts but never answers: exit 1 within the connect timeout", async () => {
    const silent = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
    try {
      const startedAt = performance.now()
      const result = await runCommand(["src/bin/main.ts"], {
        DATABASE_URL: `postgres://petstore:s3cret-pw@127.0.0.1:${silent.port}/petstore`,
        DATABASE_CONNECT_TIMEOUT_SECONDS: "1",
        PORT: String(freePort()),
        METRICS_PORT: "off"
      })
      const output = result.stdout + result.stderr
      expect(result.exitCode).toBe(1)
      expect(performance.now() - startedAt).toBeLessThan(4000)
      expect(output).toContain(`127.0.0.1:${silent.port}`)
      expect(output).not.toContain("s3cret-pw")
    } finally {
      silent.stop(true)
    }
  })

  it("SIGTERM while it waits for the database stops the process at once", async () => {
    const proc = Bun.spawn(["bun", "src/bin/main.ts"], {
      env: {
        ...process.env,
        DATABASE_URL: `postgres://petstore@127.0.0.1:${freePort()}/petstore`,
        DATABASE_START_TIMEOUT_SECONDS: "60",
        PORT: String(freePort()),
        METRICS_PORT: "off"
      },
      stdout: "pipe",
      stderr: "pipe"
    })
    let output = ""
    for (const stream of [proc.stdout, proc.stderr]) {
      void stream.pipeTo(new WritableStream({ write: (chunk) => void (output += new TextDecoder().decode(chunk)) }))
    }
    await waitFor(() => output.includes("the database refuses connections; retrying"), {
      what: "the start waiting for the database"
    })
    const sentAt = performance.now()
    proc.kill("SIGTERM")
    await proc.exited
    expect(performance.now() - sentAt).toBeLessThan(1000)
  })
})
