import { describe, expect, it } from "@effect/vitest"
import { join } from "node:path"
import { statementSummary } from "../src/Observability/Metrics.js"
import { pgQuery, sqliteQuery } from "./support/MoveCommands.js"
import { createTestDatabase } from "./support/PostgresStores.js"
import { promtoolCheckMetrics, startPrometheus } from "./support/Prometheus.js"
import { freePort, runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"

/** The value of one series in a Prometheus text exposition, or undefined when it is absent. */
const valueOf = (exposition: string, series: string) => {
  const line = exposition.split("\n").find((l) => l.startsWith(series + " "))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

const requests = (method: string, route: string, status: number) =>
  `http_server_request_duration_seconds_count{http_request_method="${method}",http_route="${route}",http_response_status_code="${status}"}`

/**
 * Every label of the statement durations names a table the database holds, and no label anywhere
 * is empty (a statement on no table, `BEGIN` or `PRAGMA`, has no table label).
 */
const expectRealTableLabels = (exposition: string, tables: ReadonlyArray<string>) => {
  expect(exposition).not.toMatch(/=""/)
  const labelled = new Set(
    [...exposition.matchAll(/^db_client_operation_duration_seconds_count\{[^}]*db_collection_name="([^"]*)"/gm)].map(([, table]) => table!)
  )
  expect(labelled.size).toBeGreaterThan(0)
  expect([...labelled].filter((table) => !tables.includes(table))).toEqual([])
}

const waitFor = async <A>(read: () => Promise<A>, done: (value: A) => boolean): Promise<A> => {
  let value = await read()
  for (let attempt = 0; attempt < 150 && !done(value); attempt++) {
    await Bun.sleep(100)
    value = await read()
  }
  return value
}

const withKey = async (folder: string) => {
  const env = { DATABASE_URL: join(folder, "petstore.db") }
  const key = (await runCommand(["src/bin/keys.ts", "create", "--name", "metrics"], env)).stdout.trim().split("\n").at(-1)!
  return { env, key }
}

describe("Prometheus metrics", () => {
  it("GET /metrics on its own listener passes promtool check metrics and counts requests by method, route template and status, never by raw path", async () => {
    using folder = temporaryFolder()
    const { env, key } = await withKey(folder.path)
    const metricsPort = freePort()
    const server = await startServer({ ...env, METRICS_PORT: String(metricsPort) })
    try {
      const headers = { authorization: `Bearer ${key}` }
      for (let i = 0; i < 2; i++) expect((await fetch(`${server.url}/v1/pets`, { headers })).status).toBe(200)
      expect((await fetch(`${server.url}/v1/pets/999`, { headers })).status).toBe(404)
      expect((await fetch(`${server.url}/no/such/path-1`)).status).toBe(404)
      expect((await fetch(`${server.url}/no/such/path-2`)).status).toBe(404)
      const created = await fetch(`${server.url}/v1/pets`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify({ name: "Rex", categoryId: 3 })
      })
      expect(created.status).toBe(201)

      const response = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toContain("text/plain; version=0.0.4")
      const exposition = await response.text()
      const check = promtoolCheckMetrics(exposition)
      expect(check.output).toBe("")
      expect(check.exitCode).toBe(0)

      expect(valueOf(exposition, requests("GET", "/v1/pets", 200))).toBe(2)
      expect(valueOf(exposition, requests("GET", "/v1/pets/{petId}", 404))).toBe(1)
      expect(valueOf(exposition, requests("POST", "/v1/pets", 201))).toBe(1)
      expect(valueOf(exposition, requests("GET", "unmatched", 404))).toBe(2)
      expect(exposition).not.toContain("path-1")
      expect(exposition).not.toContain("/v1/pets/999")
      expect(valueOf(exposition, "http_server_active_requests")).toBe(0)
      expect(valueOf(exposition, "petstore_pets_created_total")).toBe(1)
      expect(
        valueOf(
          exposition,
          `db_client_operation_duration_seconds_count{db_system_name="sqlite",db_operation_name="INSERT",db_collection_name="pets"}`
        )
      ).toBe(1)
      // The migrator's `CREATE TABLE IF NOT EXISTS`, at every start.
      expect(
        valueOf(
          exposition,
          `db_client_operation_duration_seconds_count{db_system_name="sqlite",db_operation_name="CREATE",db_collection_name="effect_sql_migrations"}`
        )
      ).toBe(1)
      expectRealTableLabels(
        exposition,
        sqliteQuery<{ name: string }>(env.DATABASE_URL, "SELECT name FROM sqlite_master WHERE type = 'table'").map(({ name }) => name)
      )
      expect(valueOf(exposition, "process_resident_memory_bytes")).toBeGreaterThan(1024 * 1024)
      expect(valueOf(exposition, "process_cpu_seconds_total")).toBeGreaterThan(0)
      expect(exposition).toContain("# TYPE nodejs_eventloop_delay_seconds histogram")

      // Not on the public API's port.
      expect((await fetch(`${server.url}/metrics`)).status).toBe(404)
      expect((await fetch(`http://127.0.0.1:${metricsPort}/v1/pets`, { headers })).status).toBe(404)
    } finally {
      await server.stop()
    }
  })

  it("with tracing on, the span export queue's metrics (OpenTelemetry's SDK names) pass promtool, a stopped collector's losses included", async () => {
    using folder = temporaryFolder()
    const { env, key } = await withKey(folder.path)
    const metricsPort = freePort()
    // Nothing listens there: every export fails.
    const collector = `http://127.0.0.1:${freePort()}`
    const server = await startServer({
      ...env,
      METRICS_PORT: String(metricsPort),
      OTEL_EXPORTER_OTLP_ENDPOINT: collector,
      OTEL_TRACES_SAMPLER: "always_on",
      OTEL_BSP_MAX_QUEUE_SIZE: "8",
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "4"
    })
    try {
      for (let i = 0; i < 5; i++) expect((await fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200)
      const read = () => fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text())
      const exposition = await waitFor(read, (text) => text.includes("error_type=\"ECONNREFUSED\""))
      const check = promtoolCheckMetrics(exposition)
      expect(check.output).toBe("")
      expect(check.exitCode).toBe(0)
      const processor = `otel_component_type="batching_span_processor"`
      expect(valueOf(exposition, `otel_sdk_processor_span_queue_capacity{${processor}}`)).toBe(8)
      expect(valueOf(exposition, `otel_sdk_processor_span_processed_total{${processor},error_type="queue_full"}`)).toBeGreaterThan(0)
      expect(exposition).toContain("# TYPE otel_sdk_exporter_span_exported_total counter")
    } finally {
      await server.stop()
    }
  })

  it("METRICS_PORT=off serves no metrics listener", async () => {
    using folder = temporaryFolder()
    const { env } = await withKey(folder.path)
    const metricsPort = freePort()
    const scrape = () => fetch(`http://127.0.0.1:${metricsPort}/metrics`).then(() => "answered", () => "refused")
    const on = await startServer({ ...env, METRICS_PORT: String(metricsPort) })
    expect(await scrape()).toBe("answered")
    await on.stop()
    const server = await startServer({ ...env, METRICS_PORT: "off", METRICS_HOST: "127.0.0.1" })
    try {
      expect(await scrape()).toBe("refused")
      const bad = await runCommand(["src/bin/main.ts"], { ...env, PORT: String(freePort()), METRICS_PORT: "no" })
      expect(bad.exitCode).toBe(1)
      expect(bad.stdout + bad.stderr).toContain("METRICS_PORT")
    } finally {
      await server.stop()
    }
  })

  it("a second instance on a metrics port that is taken does not start, and names the variables", async () => {
    using folder = temporaryFolder()
    const { env } = await withKey(folder.path)
    const metricsPort = freePort()
    const first = await startServer({ ...env, METRICS_PORT: String(metricsPort) })
    try {
      const second = Bun.spawn(["bun", "src/bin/main.ts"], {
        env: { ...process.env, ...env, HOST: "127.0.0.1", PORT: String(freePort()), METRICS_PORT: String(metricsPort) },
        stdout: "pipe",
        stderr: "pipe"
      })
      // A second instance that shared the port would run on: stopped after 10 s, so the test fails without leaving it.
      const timer = setTimeout(() => second.kill("SIGKILL"), 10_000)
      const [stdout, stderr, exitCode] = await Promise.all([new Response(second.stdout).text(), new Response(second.stderr).text(), second.exited])
      clearTimeout(timer)
      expect(exitCode).toBe(1)
      expect(stdout + stderr).toContain(`Cannot serve metrics on 127.0.0.1:${metricsPort} (METRICS_HOST, METRICS_PORT)`)
    } finally {
      await first.stop()
    }
  })

  it("a Prometheus server scraping the service returns, through its HTTP API, the requests the test made by route and status", async () => {
    using folder = temporaryFolder()
    const { env, key } = await withKey(folder.path)
    const metricsPort = freePort()
    const server = await startServer({ ...env, METRICS_PORT: String(metricsPort) })
    const prometheus = await startPrometheus(`127.0.0.1:${metricsPort}`)
    try {
      const headers = { authorization: `Bearer ${key}` }
      for (let i = 0; i < 3; i++) await fetch(`${server.url}/v1/pets`, { headers })
      for (let i = 0; i < 2; i++) await fetch(`${server.url}/v1/pets`)
      await fetch(`${server.url}/v1/pets/1`, { headers })

      const byRoute = async () =>
        Object.fromEntries(
          (await prometheus.query(
            `sum by (http_request_method, http_route, http_response_status_code) (http_server_request_duration_seconds_count{job="petstore"})`
          )).map(({ metric, value }) =>
            [`${metric.http_request_method} ${metric.http_route} ${metric.http_response_status_code}`, value]
          )
        )
      const counts = await waitFor(byRoute, (found) => found["GET /v1/pets/{petId} 404"] === 1)
      expect(counts).toEqual({
        "GET /livez 200": 1, // the test's wait for the server to answer
        "GET /v1/pets 200": 3,
        "GET /v1/pets 401": 2,
        "GET /v1/pets/{petId} 404": 1
      })
      const up = await prometheus.query(`up{job="petstore"}`)
      expect(up.map(({ value }) => value)).toEqual([1])
    } finally {
      await prometheus.stop()
      await server.stop()
    }
  })

  it("with WORKERS=2 one scrape of the supervisor counts every worker's requests, and a killed worker's counts stay", async () => {
    using folder = temporaryFolder()
    const { env, key } = await withKey(folder.path)
    const metricsPort = freePort()
    const server = await startServer({ ...env, METRICS_PORT: String(metricsPort), WORKERS: "2" })
    try {
      const listening = () => server.logs().split("\n").filter((line) => line.includes(`"listening"`)).length
      expect(await waitFor(async () => listening(), (n) => n === 2)).toBe(2)
      const scrape = () => fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text())
      // A new connection each, so the kernel spreads them over both workers.
      const call = () => fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}`, connection: "close" } })
      await Promise.all(Array.from({ length: 20 }, call))
      const first = await scrape()
      expect(promtoolCheckMetrics(first)).toEqual({ exitCode: 0, output: "" })
      expect(valueOf(first, requests("GET", "/v1/pets", 200))).toBe(20)

      const [pid] = server.logs().split("\n").filter((line) => line.includes(`"worker started"`))
        .map((line) => JSON.parse(line).annotations.pid as number)
      process.kill(pid!, "SIGKILL")
      expect(await waitFor(async () => listening(), (n) => n === 3)).toBe(3)
      const afterRestart = await scrape()
      expect(valueOf(afterRestart, requests("GET", "/v1/pets", 200))).toBe(20)

      await Promise.all(Array.from({ length: 10 }, call))
      const later = await scrape()
      expect(valueOf(later, requests("GET", "/v1/pets", 200))).toBe(30)
    } finally {
      await server.stop()
    }
  })

  it("on PostgreSQL: statement durations and the pool's connections in use and idle", async () => {
    await using database = await createTestDatabase()
    const env = { DATABASE_URL: database.url }
    const key = (await runCommand(["src/bin/keys.ts", "create", "--name", "metrics"], env)).stdout.trim().split("\n").at(-1)!
    const metricsPort = freePort()
    const server = await startServer({ ...env, METRICS_PORT: String(metricsPort) })
    try {
      expect((await fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200)
      const exposition = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text())
      expect(promtoolCheckMetrics(exposition)).toEqual({ exitCode: 0, output: "" })
      expect(
        valueOf(
          exposition,
          `db_client_operation_duration_seconds_count{db_system_name="postgresql",db_operation_name="SELECT",db_collection_name="pets"}`
        )
      ).toBe(1)
      expectRealTableLabels(
        exposition,
        (await pgQuery<{ name: string }>(database.url, "SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema()"))
          .map(({ name }) => name)
      )
      const used = valueOf(exposition, `db_client_connections_usage{state="used"}`)!
      const idle = valueOf(exposition, `db_client_connections_usage{state="idle"}`)!
      expect(used).toBeGreaterThanOrEqual(0)
      expect(idle).toBeGreaterThan(0)
      expect(used + idle).toBeLessThanOrEqual(20)
    } finally {
      await server.stop()
    }
  })
})

describe("a statement's labels", () => {
  it("name the table it works on, past IF [NOT] EXISTS, an index's ON, a subquery or a function; none when it names no table", () => {
    const tables = Object.fromEntries([
      "CREATE TABLE IF NOT EXISTS effect_sql_migrations (migration_id integer PRIMARY KEY NOT NULL)",
      `DROP TABLE IF EXISTS "pets" CASCADE`,
      "CREATE INDEX pets_status_id ON pets (status, id)",
      `CREATE UNIQUE INDEX IF NOT EXISTS api_keys_hash ON "public"."api_keys" (key_hash)`,
      "CREATE UNLOGGED TABLE rate_limit_buckets (bucket TEXT PRIMARY KEY)",
      "INSERT INTO rate_limit_buckets AS b (bucket) SELECT * FROM unnest($1) ON CONFLICT (bucket) DO UPDATE SET bucket = b.bucket",
      "DELETE FROM idempotency_keys WHERE created_at < $1",
      "SELECT * FROM (SELECT id FROM pets) AS page",
      "SELECT r.fingerprint, p.id FROM idempotency_keys r JOIN pets p ON p.id = r.pet_id",
      "UPDATE api_keys SET revoked_at = $1 WHERE id = $2",
      "COPY pets (id, name) FROM STDIN",
      "SELECT EXTRACT(epoch FROM now())",
      "PRAGMA journal_mode = WAL",
      "BEGIN",
      "SELECT 1",
      "VACUUM INTO $1"
    ].map((sql) => [sql, statementSummary(sql).table]))
    expect(Object.values(tables)).toEqual([
      "effect_sql_migrations",
      "pets",
      "pets",
      "api_keys",
      "rate_limit_buckets",
      "rate_limit_buckets",
      "idempotency_keys",
      "pets",
      "idempotency_keys",
      "api_keys",
      "pets",
      undefined,
      undefined,
      undefined,
      undefined,
      undefined
    ])
  })
})
