import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import pg from "pg"
import { codesOf, Unauthorized } from "../src/Domain/ApiError.js"
import { routes } from "../src/Http/Routes.js"
import { statementSummary } from "../src/Sql/StatementSummary.js"
import { sqlErrorTypes } from "../src/Sql/StatementTiming.js"
import { pgQuery, sqliteQuery } from "./support/MoveCommands.js"
import { createTestDatabase } from "./support/PostgresStores.js"
import { promtoolCheckMetrics, promtoolCheckRules, startPrometheus } from "./support/Prometheus.js"
import { freePort, runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

/** The value of one series in a Prometheus text exposition, or undefined when it is absent. */
const valueOf = (exposition: string, series: string) => {
  const line = exposition.split("\n").find((l) => l.startsWith(series + " "))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

const requests = (method: string, route: string, status: number) =>
  `http_server_request_duration_seconds_count{http_request_method="${method}",http_route="${route}",http_response_status_code="${status}"}`

/** Each failed-statement series of `system` in `exposition`, by error type. */
const failedStatements = (exposition: string, system: string) =>
  Object.fromEntries(sqlErrorTypes.map((type) => [
    type,
    valueOf(exposition, `db_client_operation_errors_total{db_system_name="${system}",error_type="${type}"}`)
  ]))

const noneFailed = Object.fromEntries(sqlErrorTypes.map((type) => [type, 0]))

/** The series names a PromQL expression reads: what is left once strings, selectors, ranges, label lists and functions are taken out. */
const metricsIn = (expr: string): Array<string> => {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, "")
    .replace(/\{[^}]*\}/g, " ")
    .replace(/\[[^\]]*\]/g, " ")
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ")
  const keywords = new Set(["offset", "bool", "and", "or", "unless"])
  return [...bare.matchAll(/(?<![\w:.])[a-zA-Z_:][\w:]*(?![\w:]|\s*\()/g)].map(([name]) => name).filter((name) =>
    !keywords.has(name)
  )
}

/** The alerting rules docs/operations.md's Alerts section shows (deploy/prometheus/petstore-alerts.yml): the file's text and its rules. */
const documentedAlerts = () => {
  const file = readFileSync(join(import.meta.dirname, "../deploy/prometheus/petstore-alerts.yml"), "utf8")
  const { groups } = Bun.YAML.parse(file) as {
    groups: Array<{ readonly rules: Array<{ readonly alert: string; readonly expr: string }> }>
  }
  return { rules: groups.flatMap((group) => group.rules), file }
}

/**
 * Every label of the statement durations names a table the database holds, and no label anywhere
 * is empty (a statement on no table, `BEGIN` or `PRAGMA`, has no table label).
 */
const expectRealTableLabels = (exposition: string, tables: ReadonlyArray<string>) => {
  expect(exposition).not.toMatch(/=""/)
  const labelled = new Set(
    [...exposition.matchAll(/^db_client_operation_duration_seconds_count\{[^}]*db_collection_name="([^"]*)"/gm)].map((
      [, table]
    ) => table!)
  )
  expect(labelled.size).toBeGreaterThan(0)
  expect([...labelled].filter((table) => !tables.includes(table))).toEqual([])
}

/** What `read` answers once `done` holds, or after 15 s its last answer, for the test's assertion to show. */
const readUntil = async <A>(read: () => Promise<A>, done: (value: A) => boolean): Promise<A> => {
  let value = await read()
  await waitFor(async () => done(value = await read()), { what: "a metric's value", timeout: 15_000, interval: 100 })
    .catch(() => undefined)
  return value
}

const withKey = async (folder: string) => {
  const env = { DATABASE_URL: join(folder, "petstore.db") }
  const key = (await runCommand(["src/bin/keys.ts", "create", "--name", "metrics"], env)).stdout.trim().split("\n").at(
    -1
  )!
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
        sqliteQuery<{ name: string }>(env.DATABASE_URL, "SELECT name FROM sqlite_master WHERE type = 'table'").map((
          { name }
        ) => name)
      )
      expect(valueOf(exposition, "process_resident_memory_bytes")).toBeGreaterThan(1024 * 1024)
      expect(valueOf(exposition, "process_cpu_seconds_total")).toBeGreaterThan(0)
      expect(exposition).toContain("# TYPE nodejs_eventloop_delay_seconds histogram")

      // Not on the public API's port.
      expect((await fetch(`${server.url}/metrics`)).status).toBe(404)
      expect((await fetch(`http://127.0.0.1:${metricsPort}/v1/pets`, { headers })).status).toBe(404)

      // The request log names each request's route as the metrics do, beside its path (its lines within 50 ms).
      const logged = () =>
        server.logs().split("\n").filter((line) => line.includes(`"message":"request"`))
          .map((line) =>
            JSON.parse(line).annotations as { method: string; path: string; route: string; status: number }
          )
          .map(({ method, path, route, status }) => `${method} ${path} ${route} ${status}`)
      await waitFor(() => logged().includes("POST /v1/pets /v1/pets 201"), { what: "the create's line", timeout: 5000 })
        .catch(() => undefined)
      expect(logged()).toEqual(expect.arrayContaining([
        "GET /v1/pets /v1/pets 200",
        "GET /v1/pets/999 /v1/pets/{petId} 404",
        "GET /no/such/path-1 unmatched 404",
        "POST /v1/pets /v1/pets 201"
      ]))
    } finally {
      await server.stop()
    }
  })

  it("the first scrape, before any event, has every counter whose labels are known at 0; a statement failing on SQLite's lock is counted once, by its error type", async () => {
    using folder = temporaryFolder()
    const { env, key } = await withKey(folder.path)
    const metricsPort = freePort()
    const server = await startServer({
      ...env,
      METRICS_PORT: String(metricsPort),
      DATABASE_STATEMENT_TIMEOUT_SECONDS: "0.5"
    })
    const scrape = () => fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text())
    try {
      const first = await scrape()
      expect(promtoolCheckMetrics(first)).toEqual({ exitCode: 0, output: "" })
      for (const policy of ["per-key", "failed-authentication"]) {
        expect(valueOf(first, `petstore_rate_limited_requests_total{policy="${policy}"}`), policy).toBe(0)
      }
      for (const reason of codesOf(Unauthorized)) {
        expect(valueOf(first, `petstore_failed_authentications_total{reason="${reason}"}`), reason).toBe(0)
      }
      expect(valueOf(first, "petstore_pets_created_total")).toBe(0)
      // Each route and method with each status its endpoint declares; the start's wait asked /livez once.
      const declared = routes.flatMap(({ method, path, statuses }) =>
        statuses.map((status) => requests(method, path.replace(/:(\w+)/g, "{$1}"), status))
      )
      expect(declared).toContain(requests("POST", "/v1/pets", 503))
      expect(
        declared.filter((series) => valueOf(first, series) !== (series === requests("GET", "/livez", 200) ? 1 : 0))
      )
        .toEqual([])
      expect(failedStatements(first, "sqlite")).toEqual(noneFailed)

      const other = new Database(env.DATABASE_URL)
      try {
        other.exec("BEGIN IMMEDIATE")
        const created = await fetch(`${server.url}/v1/pets`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ name: "Rex", categoryId: 3 })
        })
        expect(created.status).toBe(503)
      } finally {
        other.exec("ROLLBACK")
        other.close()
      }
      // Tried again and again for its 0.5 s, the statement failed once.
      expect(failedStatements(await scrape(), "sqlite")).toEqual({ ...noneFailed, LockTimeoutError: 1 })
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
      for (let i = 0; i < 5; i++) {
        expect((await fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200)
      }
      const read = () => fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text())
      const exposition = await readUntil(read, (text) => text.includes("error_type=\"ECONNREFUSED\""))
      const check = promtoolCheckMetrics(exposition)
      expect(check.output).toBe("")
      expect(check.exitCode).toBe(0)
      const processor = `otel_component_type="batching_span_processor"`
      expect(valueOf(exposition, `otel_sdk_processor_span_queue_capacity{${processor}}`)).toBe(8)
      expect(valueOf(exposition, `otel_sdk_processor_span_processed_total{${processor},error_type="queue_full"}`))
        .toBeGreaterThan(0)
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
      const [stdout, stderr, exitCode] = await Promise.all([
        new Response(second.stdout).text(),
        new Response(second.stderr).text(),
        second.exited,
        waitFor(() => second.exitCode !== null, { what: "the second instance's exit" }).catch(() =>
          second.kill("SIGKILL")
        )
      ])
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
            `sum by (http_request_method, http_route, http_response_status_code) (http_server_request_duration_seconds_count{job="petstore"}) > 0`
          )).map((
            { metric, value }
          ) => [`${metric.http_request_method} ${metric.http_route} ${metric.http_response_status_code}`, value])
        )
      const counts = await readUntil(byRoute, (found) => found["GET /v1/pets/{petId} 404"] === 1)
      // The series exported at 0 before any request are left out.
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
      expect(await readUntil(async () => listening(), (n) => n === 2)).toBe(2)
      const scrape = () => fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text())
      // A new connection each, so the kernel spreads them over both workers.
      const call = () =>
        fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}`, connection: "close" } })
      await Promise.all(Array.from({ length: 20 }, call))
      const first = await scrape()
      expect(promtoolCheckMetrics(first)).toEqual({ exitCode: 0, output: "" })
      expect(valueOf(first, requests("GET", "/v1/pets", 200))).toBe(20)

      const [pid] = server.logs().split("\n").filter((line) => line.includes(`"worker started"`))
        .map((line) => JSON.parse(line).annotations.pid as number)
      process.kill(pid!, "SIGKILL")
      expect(await readUntil(async () => listening(), (n) => n === 3)).toBe(3)
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
    const key = (await runCommand(["src/bin/keys.ts", "create", "--name", "metrics"], env)).stdout.trim().split("\n")
      .at(-1)!
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
        (await pgQuery<{ name: string }>(
          database.url,
          "SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema()"
        ))
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

  it("on PostgreSQL: the pool's limit and the requests waiting for a connection; failed statements counted by error type, a wait that found no connection included; the alerting rules file passes promtool check rules and reads only series the service exposes", async () => {
    await using database = await createTestDatabase()
    const poolSize = 20
    const env = {
      DATABASE_URL: database.url,
      // The requests waiting for a connection give up after 1 s, the lists holding the pool at 4 s.
      DATABASE_CONNECT_TIMEOUT_SECONDS: "1",
      DATABASE_STATEMENT_TIMEOUT_SECONDS: "4",
      REQUEST_TIMEOUT_SECONDS: "6",
      RATE_LIMIT_PER_SECOND: "100000",
      RATE_LIMIT_BURST: "100000"
    }
    const key = (await runCommand(["src/bin/keys.ts", "create", "--name", "metrics"], env)).stdout.trim().split("\n")
      .at(-1)!
    const metricsPort = freePort()
    // Tracing on, sampling nothing, to a collector that is away: the span export's series exist, for the alerts' check.
    const server = await startServer({
      ...env,
      METRICS_PORT: String(metricsPort),
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${freePort()}`,
      OTEL_TRACES_SAMPLER: "always_off"
    })
    const scrape = () => fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text())
    const admin = new pg.Client({ connectionString: database.url })
    await admin.connect()
    try {
      const first = await scrape()
      expect(promtoolCheckMetrics(first)).toEqual({ exitCode: 0, output: "" })
      expect(valueOf(first, "db_client_connection_max")).toBe(poolSize)
      expect(valueOf(first, "db_client_connection_pending_requests")).toBe(0)
      expect(failedStatements(first, "postgresql")).toEqual(noneFailed)

      const { file, rules } = documentedAlerts()
      expect(rules.map(({ alert }) => alert)).toEqual(
        expect.arrayContaining(["PetstoreDatabasePoolSaturated", "PetstoreDatabaseErrors"])
      )
      const check = promtoolCheckRules(file)
      expect(check.exitCode, check.output).toBe(0)
      expect(check.output).toContain(`SUCCESS: ${rules.length} rules found`)
      const named = rules.flatMap(({ alert, expr }) => metricsIn(expr).map((metric) => ({ alert, metric })))
      expect(named.map(({ metric }) => metric)).toEqual(
        expect.arrayContaining(["db_client_connection_pending_requests", "up"])
      )
      // `up` is Prometheus's own, for the target it scraped.
      const exposed = (metric: string) =>
        metric === "up" ||
        first.split("\n").some((line) => line.startsWith(`${metric}{`) || line.startsWith(`${metric} `))
      expect(named.filter(({ metric }) => !exposed(metric))).toEqual([])

      // The 20 sessions held by lists waiting on a locked table, then 3 more requests wait for one.
      const list = () => fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
      await admin.query("BEGIN")
      await admin.query("LOCK TABLE pets IN ACCESS EXCLUSIVE MODE")
      const holding = Array.from({ length: poolSize }, list)
      const used = await readUntil(
        async () => valueOf(await scrape(), `db_client_connections_usage{state="used"}`),
        (n) => n === poolSize
      )
      expect(used).toBe(poolSize)
      const waiting = Array.from({ length: 3 }, list)
      const pending = await readUntil(
        async () => valueOf(await scrape(), "db_client_connection_pending_requests"),
        (n) => n === 3
      )
      expect(pending).toBe(3)
      // None came free within DATABASE_CONNECT_TIMEOUT_SECONDS; then each list's statement timed out.
      for (const answer of await Promise.all(waiting)) expect(answer.status).toBe(503)
      for (const answer of await Promise.all(holding)) expect(answer.status).toBe(503)
      await admin.query("ROLLBACK")

      const after = await scrape()
      const failed = failedStatements(after, "postgresql")
      // The read-only flag's poll, once a second, may have found no connection either.
      expect(failed.ConnectionError).toBeGreaterThanOrEqual(waiting.length)
      expect(failed).toEqual({
        ...noneFailed,
        ConnectionError: failed.ConnectionError,
        StatementTimeoutError: poolSize
      })
      expect(valueOf(after, "db_client_connection_pending_requests")).toBe(0)
    } finally {
      await admin.end().catch(() => undefined)
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
