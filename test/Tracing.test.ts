import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { HttpClient } from "effect/http"
import { join } from "node:path"
import { PetStoreClient } from "../src/Client/PetStoreClient.js"
import { PetRepository } from "../src/Pets/PetRepository.js"
import { petColumnNames } from "../src/Sql/PetColumns.js"
import { startOtlpReceiver } from "./support/OtlpReceiver.js"
import { createTestDatabase } from "./support/PostgresStores.js"
import { readLoad } from "./support/ReadLoad.js"
import { freePort, runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"
import { createKey, makeTestServer, send } from "./support/TestServer.js"
import { waitFor } from "./support/WaitFor.js"

/** The pets' columns as every statement of the store selects them. */
const petColumns = petColumnNames.join(", ")

const callerTraceId = "0af7651916cd43dd8448eb211c80319c"
const callerSpanId = "b7ad6b7169203331"

/** A real server exporting every span at once to a receiving end the test started. */
const startTracedServer = async (folder: string, env: Record<string, string> = {}, receiver = startOtlpReceiver()) => {
  const database = { DATABASE_URL: env.DATABASE_URL ?? join(folder, "petstore.db") }
  const key = (await runCommand(["src/bin/keys.ts", "create", "--name", "tracing"], database)).stdout.trim().split("\n")
    .at(-1)!
  const server = await startServer({
    ...database,
    METRICS_PORT: "off",
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_BSP_SCHEDULE_DELAY: "20",
    ...env
  })
  return {
    receiver,
    key,
    server,
    [Symbol.asyncDispose]: async () => {
      await server.stop()
      receiver.stop()
    }
  }
}

/** An idempotent create (`Idempotency-Key: rex-once`): its store call runs in a transaction. */
const createOnce = (url: string, key: string) =>
  fetch(`${url}/v1/pets`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "idempotency-key": "rex-once" },
    body: JSON.stringify({ name: "Rex", categoryId: 3 })
  })

describe("traces over OTLP/HTTP", () => {
  it("a request's server span continues the caller's traceparent, with child spans for authentication, the repository and each SQL statement, and no key anywhere", async () => {
    using folder = temporaryFolder()
    await using traced = await startTracedServer(folder.path, {
      OTEL_SERVICE_NAME: "petstore-under-test",
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment.name=test"
    })
    const { key, receiver, server } = traced
    const created = await fetch(`${server.url}/v1/pets`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "Rex", categoryId: 3 })
    }).then((r) => r.json() as Promise<{ id: number }>)
    // The key's first request looks it up, in a statement span below its authentication's; the
    // next ones within half a second trust what it found.
    const createSpan = await receiver.waitFor((span) => span.name === "POST /v1/pets" && span.kind === 2)
    const createAuthentication = await receiver.waitFor((span) =>
      span.name === "authenticate" && span.parentSpanId === createSpan.spanId
    )
    const keyLookup = await receiver.waitFor((span) =>
      span.parentSpanId === createAuthentication.spanId && span.attributes["db.collection.name"] === "api_keys"
    )
    expect(keyLookup.attributes).toMatchObject({ "db.system": "sqlite", "db.operation.name": "SELECT" })
    expect(keyLookup.attributes["db.query.text"]).toContain("?")

    const response = await fetch(`${server.url}/v1/pets/${created.id}`, {
      headers: { authorization: `Bearer ${key}`, traceparent: `00-${callerTraceId}-${callerSpanId}-01` }
    })
    expect(response.status).toBe(200)

    const serverSpan = await receiver.waitFor((span) => span.traceId === callerTraceId && span.kind === 2)
    expect(serverSpan.name).toBe("GET /v1/pets/{petId}")
    expect(serverSpan.parentSpanId).toBe(callerSpanId)
    expect(serverSpan.attributes).toMatchObject({
      "http.request.method": "GET",
      "http.route": "/v1/pets/{petId}",
      "http.response.status_code": 200,
      "url.path": `/v1/pets/${created.id}`,
      "client.address": "127.0.0.1"
    })
    expect(serverSpan.resource).toMatchObject({
      "service.name": "petstore-under-test",
      "deployment.environment.name": "test"
    })

    const authentication = await receiver.waitFor((span) =>
      span.name === "authenticate" && span.traceId === callerTraceId
    )
    expect(authentication.parentSpanId).toBe(serverSpan.spanId)

    const repository = await receiver.waitFor((span) =>
      span.name === "PetRepository.findById" && span.traceId === callerTraceId
    )
    expect(repository.parentSpanId).toBe(serverSpan.spanId)
    const query = await receiver.waitFor((span) => span.parentSpanId === repository.spanId)
    expect(query.name).toBe("SELECT pets")
    expect(query.kind).toBe(3)
    expect(query.attributes).toMatchObject({ "db.system": "sqlite", "db.collection.name": "pets" })
    expect(query.attributes["db.query.text"]).toBe(`SELECT ${petColumns} FROM pets WHERE id = ?`)

    // The request's log line names its trace and span beside the request id. It comes through the
    // server's stdout, a channel of its own: it may arrive after the spans.
    const logLine = () => server.logs().split("\n").find((l) => l.includes(`"path":"/v1/pets/${created.id}"`))
    const line = JSON.parse(await waitFor(logLine, { what: "the request's log line", timeout: 5000 }))
    expect(line.annotations).toMatchObject({ trace_id: callerTraceId, span_id: serverSpan.spanId })

    const exported = receiver.bodies.join("\n")
    expect(exported).not.toContain(key)
    expect(exported.toLowerCase()).not.toContain("authorization")
    expect(exported).not.toContain("Bearer")
  })

  it("a failure marks its span; a request no route matched is named by its method alone", async () => {
    using folder = temporaryFolder()
    await using traced = await startTracedServer(folder.path)
    const { receiver, server } = traced
    expect((await fetch(`${server.url}/v1/pets`, { headers: { authorization: "Bearer ps_test_wrong" } })).status).toBe(
      401
    )
    const authentication = await receiver.waitFor((span) => span.name === "authenticate")
    expect(authentication.status.code).toBe(2)
    const serverSpan = receiver.spans.find((span) => span.spanId === authentication.parentSpanId)!
    expect(serverSpan.name).toBe("GET /v1/pets")
    expect(serverSpan.attributes["http.response.status_code"]).toBe(401)

    expect((await fetch(`${server.url}/v1/nothing/here`)).status).toBe(404)
    const unmatched = await receiver.waitFor((span) =>
      span.kind === 2 && span.attributes["url.path"] === "/v1/nothing/here"
    )
    expect(unmatched.name).toBe("GET")
    expect(unmatched.attributes["http.route"]).toBeUndefined()
    expect(receiver.bodies.join("\n")).not.toContain("ps_test_wrong")
  })

  it("an idempotent create's statements, BEGIN and COMMIT included, are children of its sql.transaction span, below its store call", async () => {
    using folder = temporaryFolder()
    await using traced = await startTracedServer(folder.path)
    const { key, receiver, server } = traced
    expect((await createOnce(server.url, key)).status).toBe(201)
    const store = await receiver.waitFor((span) => span.name === "PetRepository.createOnce")
    const transaction = await receiver.waitFor((span) =>
      span.name === "sql.transaction" && span.parentSpanId === store.spanId
    )
    expect(transaction.attributes).toMatchObject({ "db.system.name": "sqlite" })
    await receiver.waitFor((span) => span.name === "COMMIT" && span.parentSpanId === transaction.spanId)
    const statements = receiver.spans.filter((span) => span.parentSpanId === transaction.spanId).map((span) =>
      span.name
    )
    expect(statements).toEqual(expect.arrayContaining(["BEGIN", "INSERT pets", "COMMIT"]))
  })

  it("the typed client sends traceparent from its current span, so the caller's trace crosses into the service", async () => {
    using folder = temporaryFolder()
    await using traced = await startTracedServer(folder.path)
    const { key, receiver, server } = traced
    const callerTrace = await Effect.gen(function*() {
      const client = yield* PetStoreClient
      yield* client.listPets({ limit: 1 })
      return (yield* Effect.currentSpan).traceId
    }).pipe(
      Effect.withSpan("caller"),
      Effect.provide(PetStoreClient.layer({ target: { baseUrl: server.url }, apiKey: Redacted.make(key) })),
      Effect.runPromise
    )
    const serverSpan = await receiver.waitFor((span) => span.kind === 2 && span.name === "GET /v1/pets")
    expect(serverSpan.traceId).toBe(callerTrace)
    expect(serverSpan.parentSpanId).toBeDefined()
  })

  it("sampling at a ratio of 0 exports no trace the caller did not sample; bad sampler settings stop the start naming the variable", async () => {
    using folder = temporaryFolder()
    await using traced = await startTracedServer(folder.path, {
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0"
    })
    const { key, receiver, server } = traced
    await fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
    // A sampled parent is followed whatever the ratio.
    await fetch(`${server.url}/v1/pets`, {
      headers: { authorization: `Bearer ${key}`, traceparent: `00-${callerTraceId}-${callerSpanId}-01` }
    })
    await receiver.waitFor((span) => span.traceId === callerTraceId && span.kind === 2)
    expect(new Set(receiver.spans.map((span) => span.traceId))).toEqual(new Set([callerTraceId]))

    const refused = await runCommand(["src/bin/main.ts"], {
      DATABASE_URL: join(folder.path, "other.db"),
      PORT: String(freePort()),
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_TRACES_SAMPLER_ARG: "1.5"
    })
    expect(refused.exitCode).toBe(1)
    expect(refused.stdout + refused.stderr).toContain("OTEL_TRACES_SAMPLER_ARG")
  })

  it("parentbased: a caller's flags 00 is not recorded even at ratio 1, 01 is; the caller's span is the parent, its trace continued", async () => {
    using folder = temporaryFolder()
    await using traced = await startTracedServer(folder.path, {
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "1"
    })
    const { key, receiver, server } = traced
    const unsampledTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
    const tracestate = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
    expect(
      (await fetch(`${server.url}/v1/pets`, {
        headers: { authorization: `Bearer ${key}`, traceparent: `00-${unsampledTrace}-00f067aa0ba902b7-00`, tracestate }
      })).status
    ).toBe(200)
    expect(
      (await fetch(`${server.url}/v1/pets`, {
        headers: { authorization: `Bearer ${key}`, traceparent: `00-${callerTraceId}-${callerSpanId}-01`, tracestate }
      })).status
    ).toBe(200)
    // A request of no trace is a new one, sampled at ratio 1.
    expect((await fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200)

    const serverSpan = await receiver.waitFor((span) => span.traceId === callerTraceId && span.kind === 2)
    expect(serverSpan.parentSpanId).toBe(callerSpanId)
    const authentication = await receiver.waitFor((span) =>
      span.name === "authenticate" && span.traceId === callerTraceId
    )
    expect(authentication.parentSpanId).toBe(serverSpan.spanId)
    const repository = await receiver.waitFor((span) =>
      span.name === "PetRepository.list" && span.traceId === callerTraceId
    )
    const statement = await receiver.waitFor((span) => span.parentSpanId === repository.spanId)
    expect(statement.traceId).toBe(callerTraceId)
    const newTrace = await receiver.waitFor((span) =>
      span.kind === 2 && span.attributes["url.path"] === "/v1/pets" && span.traceId !== callerTraceId
    )
    expect(newTrace.parentSpanId).toBeUndefined()

    // Spans are exported in the order they end: the unsampled request's would have come first.
    expect(receiver.spans.filter((span) => span.traceId === unsampledTrace)).toEqual([])
    // The three requests' log lines (written within 50 ms): only the sampled ones name a trace.
    const lines = () =>
      server.logs().split("\n").filter((l) => l.includes(`"path":"/v1/pets"`)).map((l) => JSON.parse(l).annotations)
    await waitFor(() => lines().length >= 3, { what: "the three log lines", timeout: 5000 }).catch(() => undefined)
    expect(lines().map((line) => line.trace_id)).toEqual([undefined, callerTraceId, newTrace.traceId])
  })

  it("parentbased: an invalid traceparent (all-zero trace id, version ff) starts a new trace", async () => {
    using folder = temporaryFolder()
    await using traced = await startTracedServer(folder.path)
    const { receiver, server } = traced
    for (const traceparent of [`00-${"0".repeat(32)}-${callerSpanId}-01`, `ff-${callerTraceId}-${callerSpanId}-01`]) {
      expect((await fetch(`${server.url}/livez`, { headers: { traceparent } })).status).toBe(200)
    }
    // The start's readiness check is the first request, then the two of the test.
    await receiver.waitFor((span) => span.kind === 2 && receiver.spans.filter((s) => s.kind === 2).length === 3)
    for (const span of receiver.spans.filter((s) => s.kind === 2)) {
      expect(span.parentSpanId).toBeUndefined()
      expect(span.traceId).not.toBe(callerTraceId)
      expect(span.traceId).not.toBe("0".repeat(32))
    }
  })

  const metricValue = (exposition: string, series: string) => {
    const line = exposition.split("\n").find((l) => l.startsWith(series + " "))
    return line === undefined ? undefined : Number(line.slice(series.length + 1))
  }

  const collectorAway = (collector: "stopped" | "hung") => async () => {
    using folder = temporaryFolder()
    const metricsPort = freePort()
    const receiver = startOtlpReceiver()
    // Stopped: its port refuses every connection. Hung: it takes each export and never answers.
    const hung = collector === "hung"
      ? Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Promise<Response>(() => {}) })
      : undefined
    receiver.stop()
    await using traced = await startTracedServer(folder.path, {
      OTEL_EXPORTER_OTLP_ENDPOINT: hung === undefined ? receiver.endpoint : `http://127.0.0.1:${hung.port}`,
      OTEL_EXPORTER_OTLP_TIMEOUT: "500",
      OTEL_TRACES_SAMPLER: "always_on",
      OTEL_BSP_MAX_QUEUE_SIZE: "200",
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "50",
      METRICS_PORT: String(metricsPort),
      RATE_LIMIT_PER_SECOND: "1000000",
      RATE_LIMIT_BURST: "1000000"
    }, receiver)
    try {
      const { key, server } = traced
      for (const count of [1500, 3000, 300]) {
        const run = await readLoad(server.url, key, count)
        expect([...run.statuses]).toEqual([200])
        // A generous bound for a shared machine: a request never waits for an export.
        expect(run.p99).toBeLessThan(500)
      }

      // The first batches' answers (a refusal, or a timeout after 500 ms) may come after the load.
      const scrape = () => fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text())
      const failedSeries = (text: string) =>
        text.split("\n").filter((l) =>
          l.startsWith("otel_sdk_exporter_span_exported_total{") && l.includes("error_type=")
        )
      const exposition = await waitFor(async () => {
        const text = await scrape()
        return failedSeries(text).length > 0 && text
      }, { what: "a failed export counted", timeout: 5000 })
      expect(exposition).toContain("otel_sdk_")
      const processor = `otel_component_type="batching_span_processor"`
      expect(metricValue(exposition, `otel_sdk_processor_span_queue_capacity{${processor}}`)).toBe(200)
      expect(metricValue(exposition, `otel_sdk_processor_span_queue_size{${processor}}`)).toBeLessThanOrEqual(200)
      // Each request makes four spans or more (its key is looked up once); all but a few batches
      // of them were dropped.
      expect(metricValue(exposition, `otel_sdk_processor_span_processed_total{${processor},error_type="queue_full"}`))
        .toBeGreaterThan(4500 * 3)
      const lost = failedSeries(exposition)
      expect(lost.length).toBeGreaterThan(0)
      if (collector === "hung") expect(lost.join("\n")).toContain(`error_type="timeout"`)
      expect(
        metricValue(
          exposition,
          `otel_sdk_exporter_span_exported_total{otel_component_type="otlp_http_json_span_exporter"}`
        )
      )
        .toBe(0)
      // A stop sends what is queued for 3 s at most, then goes.
      const stopping = performance.now()
      expect(await server.stop()).toBe(0)
      expect(performance.now() - stopping).toBeLessThan(6000)
    } finally {
      hung?.stop(true)
    }
  }

  it(
    "a collector stopped costs requests nothing: they answer promptly, spans beyond the bounded queue are dropped and counted, those held stay within it",
    collectorAway("stopped"),
    120_000
  )

  it(
    "a collector that takes exports and never answers: each export times out, requests answer promptly, drops counted",
    collectorAway("hung"),
    120_000
  )

  it(
    "on PostgreSQL: a sampled request's statements are children of its store call, a transaction's of its span; an unsampled request's make no span",
    async () => {
      using folder = temporaryFolder()
      await using database = await createTestDatabase()
      await using traced = await startTracedServer(folder.path, { DATABASE_URL: database.url })
      const { key, receiver, server } = traced
      const unsampledTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
      expect(
        (await fetch(`${server.url}/v1/pets?limit=1`, {
          headers: { authorization: `Bearer ${key}`, traceparent: `00-${unsampledTrace}-00f067aa0ba902b7-00` }
        })).status
      ).toBe(200)
      expect(
        (await fetch(`${server.url}/v1/pets?limit=1`, {
          headers: { authorization: `Bearer ${key}`, traceparent: `00-${callerTraceId}-${callerSpanId}-01` }
        })).status
      ).toBe(200)
      const repository = await receiver.waitFor((span) =>
        span.name === "PetRepository.list" && span.traceId === callerTraceId
      )
      const statement = await receiver.waitFor((span) => span.parentSpanId === repository.spanId && span.kind === 3)
      expect(statement.name).toBe("SELECT pets")
      expect(statement.attributes).toMatchObject({ "db.system": "postgresql", "db.collection.name": "pets" })
      expect(statement.attributes["db.query.text"]).toBe(
        `SELECT ${petColumns} FROM pets WHERE id > $1 ORDER BY id LIMIT $2`
      )
      expect(receiver.spans.filter((span) => span.traceId === unsampledTrace)).toEqual([])
      // Nor did the unsampled request's statements start traces of their own: every trace has its server span.
      const traces = new Set(receiver.spans.filter((span) => span.kind === 2).map((span) => span.traceId))
      expect(receiver.spans.filter((span) => !traces.has(span.traceId))).toEqual([])
      expect(receiver.spans.filter((span) => span.kind === 2 && span.attributes["url.path"] === "/v1/pets"))
        .toHaveLength(1)

      // A transaction's span is made on PostgreSQL too, its statements below it.
      expect((await createOnce(server.url, key)).status).toBe(201)
      const transaction = await receiver.waitFor((span) => span.name === "sql.transaction")
      expect(transaction.attributes).toMatchObject({ "db.system.name": "postgresql" })
      await receiver.waitFor((span) => span.name === "INSERT pets" && span.parentSpanId === transaction.spanId)
    },
    120_000
  )

  it.live("a span a maintainer opens with Effect.fn or Effect.withSpan in a sampled request is its trace's, the child of the span it runs under; an unsampled request makes none", () => {
    const receiver = startOtlpReceiver()
    // The in-memory store, its lookup by id written as a maintainer adds spans to it.
    const pets = Layer.effect(
      PetRepository,
      Effect.map(PetRepository, (stored) => {
        const lookUp = Effect.fn("lookUp")(function*(id: number) {
          return yield* Effect.withSpan(stored.findById(id), "read the store", { attributes: { "pet.id": id } })
        })
        return PetRepository.of({ ...stored, findById: lookUp })
      })
    ).pipe(Layer.provide(PetRepository.InMemory))
    const tracing = {
      defaultServiceName: "petstore",
      sampler: "parentbased_always_on",
      ratio: 1,
      batch: { maxQueueSize: 100, maxExportBatchSize: 1, scheduleDelayMillis: 20 },
      exporter: { url: `${receiver.endpoint}/v1/traces`, headers: {}, timeoutMillis: 1000, gzip: false }
    } as const
    return Effect.gen(function*() {
      const { key } = yield* createKey()
      const bearer = { key, headers: {} }
      const unsampledTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
      const unsampled = yield* send("GET", "/v1/pets/1", {
        ...bearer,
        headers: { traceparent: `00-${unsampledTrace}-00f067aa0ba902b7-00` }
      })
      expect(unsampled.status).toBe(404)
      const sampled = yield* send("GET", "/v1/pets/1", {
        ...bearer,
        headers: { traceparent: `00-${callerTraceId}-${callerSpanId}-01` }
      })
      expect(sampled.status).toBe(404)
      const repository = yield* Effect.promise(() =>
        receiver.waitFor((span) => span.name === "PetRepository.findById" && span.traceId === callerTraceId)
      )
      const lookUp = yield* Effect.promise(() => receiver.waitFor((span) => span.name === "lookUp"))
      expect(lookUp).toMatchObject({ traceId: callerTraceId, parentSpanId: repository.spanId })
      const read = yield* Effect.promise(() => receiver.waitFor((span) => span.name === "read the store"))
      expect(read).toMatchObject({ traceId: callerTraceId, parentSpanId: lookUp.spanId })
      expect(read.attributes["pet.id"]).toBe(1)
      yield* Effect.promise(() => receiver.waitFor((span) => span.kind === 2 && span.traceId === callerTraceId))
      expect(receiver.spans.filter((span) => span.traceId === unsampledTrace)).toEqual([])
      expect(receiver.spans.filter((span) => span.name === "lookUp")).toHaveLength(1)
    }).pipe(
      // The test's client sends the traceparent written here, none of its own.
      Effect.provideService(HttpClient.TracerPropagationEnabled, false),
      Effect.provide(makeTestServer(pets, {}, undefined, { tracing: Option.some(tracing) })),
      Effect.ensuring(Effect.promise(async () => receiver.stop()))
    )
  })
})
