import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Exit, Layer, Option, Tracer } from "effect"
import { Headers, HttpServerRequest } from "effect/http"
import { PrometheusMetrics } from "effect/observability"
import { makeRequestLog } from "../src/Http/RequestLog.js"
import { ObservabilityConfig, type Tracing } from "../src/Observability/ObservabilityConfig.js"
import { makeSampler } from "../src/Observability/Sampler.js"
import { callerSpanOf } from "../src/Observability/TraceContext.js"
import { inSampledSpan, TracingLive } from "../src/Observability/Tracing.js"
import { makeClientAddress } from "../src/Request/ClientAddress.js"
import { RequestRecord } from "../src/Request/CurrentRequest.js"
import { startStatementSpan } from "../src/Sql/StatementSpans.js"
import { startOtlpReceiver } from "./support/OtlpReceiver.js"
import { waitForEffect } from "./support/WaitFor.js"

const traceId = "0af7651916cd43dd8448eb211c80319c"
const parent = (sampled: boolean, id = traceId) => ({ traceId: id, sampled })
/** Trace ids whose last 56 bits are spread evenly, as random ones are. */
const traceIds = Array.from(
  { length: 10_000 },
  (_, i) => "0".repeat(18) + Math.floor(((i + 0.5) / 10_000) * 2 ** 56).toString(16).padStart(14, "0")
)

describe("sampling", () => {
  it("parentbased samplers follow the caller's flag whatever the ratio; the others decide alone", () => {
    for (const ratio of [0, 0.01, 1]) {
      const sample = makeSampler("parentbased_traceidratio", ratio)
      expect(sample(parent(true))).toBe(true)
      expect(sample(parent(false))).toBe(false)
    }
    expect(makeSampler("parentbased_always_on", 1)(parent(false))).toBe(false)
    expect(makeSampler("parentbased_always_off", 1)(parent(true))).toBe(true)
    expect(makeSampler("parentbased_always_on", 1)(undefined)).toBe(true)
    expect(makeSampler("parentbased_always_off", 1)(undefined)).toBe(false)
    expect(makeSampler("always_on", 0)(parent(false))).toBe(true)
    expect(makeSampler("always_off", 1)(parent(true))).toBe(false)
  })

  it("a ratio keeps that share of new traces, and of callers' trace ids, the same ids every time", () => {
    const root = makeSampler("parentbased_traceidratio", 0.01)
    const kept = Array.from({ length: 100_000 }, () => root(undefined)).filter(Boolean).length
    expect(kept).toBeGreaterThan(800)
    expect(kept).toBeLessThan(1200)

    const byId = makeSampler("traceidratio", 0.25)
    const chosen = traceIds.filter((id) => byId(parent(false, id)))
    expect(chosen.length).toBe(2500)
    expect(traceIds.filter((id) => byId(parent(true, id)))).toEqual(chosen)
    expect(traceIds.some((id) => makeSampler("traceidratio", 0)(parent(true, id)))).toBe(false)
    expect(traceIds.every((id) => makeSampler("traceidratio", 1)(parent(false, id)))).toBe(true)
  })
})

describe("traceparent", () => {
  const read = (headers: Record<string, string>) => callerSpanOf(Headers.fromInput(headers))

  it("reads version 00 and a later version's first four fields", () => {
    expect(read({ traceparent: ` 00-${traceId}-b7ad6b7169203331-01 ` })).toMatchObject({
      traceId,
      spanId: "b7ad6b7169203331",
      sampled: true
    })
    expect(read({ traceparent: `00-${traceId}-b7ad6b7169203331-00` })?.sampled).toBe(false)
    expect(read({ traceparent: `cc-${traceId}-b7ad6b7169203331-09-what-comes-later` })?.sampled).toBe(true)
  })

  it("ignores what the W3C calls invalid, and B3 headers", () => {
    for (
      const traceparent of [
        `00-${"0".repeat(32)}-b7ad6b7169203331-01`,
        `00-${traceId}-${"0".repeat(16)}-01`,
        `ff-${traceId}-b7ad6b7169203331-01`,
        `00-${traceId.toUpperCase()}-b7ad6b7169203331-01`,
        `00-${traceId}-b7ad6b7169203331-01-more`,
        `00-${traceId}-b7ad6b7169203331`,
        "garbage"
      ]
    ) expect(read({ traceparent })).toBeUndefined()
    expect(read({ b3: `${traceId}-b7ad6b7169203331-1` })).toBeUndefined()
  })
})

/** Tracing exporting to `url`, every trace sampled at the edge, its queue and batches small. */
const tracingTo = (url: string, overrides: Partial<Tracing["batch"]> = {}, timeoutMillis = 1000) =>
  TracingLive.pipe(
    Layer.provide(ObservabilityConfig.make({
      tracing: Option.some({
        defaultServiceName: undefined,
        sampler: "always_on",
        ratio: 1,
        batch: { maxQueueSize: 10, maxExportBatchSize: 4, scheduleDelayMillis: 20, ...overrides },
        exporter: { url: `${url}/v1/traces`, headers: {}, timeoutMillis, gzip: false }
      })
    })),
    Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({
      // The resource is the library's to read.
      env: { OTEL_SERVICE_NAME: "sampling-test", OTEL_RESOURCE_ATTRIBUTES: "deployment.environment.name=test" }
    })))
  )

/**
 * A sampled request's trace as the request observer starts one (Effect's tracing on below its
 * server span), with `children` spans of Effect's below its server span; answers the server span.
 */
const sampledRequest = (name: string, children: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < children; i++) yield* Effect.withSpan(Effect.void, `child ${i}`, { attributes: { i } })
    return yield* Effect.currentSpan
  }).pipe(Effect.withSpan(name, { kind: "server", root: true }), Effect.orDie, Effect.withTracerEnabled(true))

/** A series' value in this process's exposition, or undefined when it is absent. */
const valueOf = (series: string) => {
  const line = PrometheusMetrics.formatUnsafe(Context.empty()).split("\n").find((l) => l.startsWith(series + " "))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}
const processor = `otel_component_type="batching_span_processor"`
const exporter = `otel_component_type="otlp_http_json_span_exporter"`

describe("the tracer", () => {
  it("names the service as the operator does (OTEL_SERVICE_NAME, else service.name among OTEL_RESOURCE_ATTRIBUTES), else petstore; a value that does not decode stops the start", () => {
    const read = (env: Record<string, string>) =>
      Effect.runSyncExit(
        Effect.map(ObservabilityConfig.config, (config) => config).pipe(
          Effect.provideService(
            ConfigProvider.ConfigProvider,
            ConfigProvider.fromEnv({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", ...env } })
          )
        )
      )
    const defaultName = (env: Record<string, string>) => {
      const exit = read(env)
      return Exit.isSuccess(exit) ? Option.getOrThrow(exit.value.tracing).defaultServiceName : "refused"
    }
    expect(defaultName({})).toBe("petstore")
    expect(defaultName({ OTEL_SERVICE_NAME: "shop" })).toBeUndefined()
    expect(defaultName({ OTEL_RESOURCE_ATTRIBUTES: "service.name=shop,team=pets" })).toBeUndefined()
    expect(defaultName({ OTEL_RESOURCE_ATTRIBUTES: "team=pets%zz" })).toBe("refused")
    expect(String(read({ OTEL_RESOURCE_ATTRIBUTES: "team=pets%zz" }))).toContain("OTEL_RESOURCE_ATTRIBUTES")
    // The exporter's headers are the same kind of list, and refused alike.
    expect(String(read({ OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%zz" }))).toContain(
      "OTEL_EXPORTER_OTLP_HEADERS"
    )
    // An item that is not key=value (a header written as HTTP writes it, an empty item) is refused, not skipped.
    for (const headers of ["Authorization: Bearer x", "a=1,,b=2", "=v"]) {
      expect(String(read({ OTEL_EXPORTER_OTLP_HEADERS: headers }))).toContain("must be comma-separated key=value pairs")
    }
    const headers = Exit.map(
      read({ OTEL_EXPORTER_OTLP_HEADERS: " authorization = Bearer%20x , x-team=pets" }),
      (config) => Option.getOrThrow(config.tracing).exporter.headers
    )
    expect(headers).toEqual(Exit.succeed({ authorization: "Bearer x", "x-team": "pets" }))
  })

  it("records a sampled request's trace: Effect's spans and the statements' below its server span; outside one, Effect's spans are never made", async () => {
    const receiver = startOtlpReceiver()
    // The clock spans are timed by: nanoseconds since the epoch.
    const nanosNow = () => BigInt(Math.floor((performance.timeOrigin + performance.now()) * 1000)) * 1000n
    const before = nanosNow() - 1000n
    try {
      const caller = Tracer.externalSpan({ traceId, spanId: "b7ad6b7169203331", sampled: false })
      const request = await Effect.gen(function*() {
        // Background work, and what a library opens outside a sampled request: Effect's tracing is off.
        yield* Effect.withSpan(Effect.withSpan(Effect.void, "inner"), "library work")
        // Outside a request, a statement has no span.
        expect(startStatementSpan("sqlite", "SELECT 1")).toBeUndefined()
        const statement = Effect.sync(() =>
          startStatementSpan("sqlite", "SELECT id, name FROM pets WHERE id = ?")?.(Exit.void)
        )
        // The sampler's choice holds even when the caller's flag said no; named by its method, and
        // by its method and route once the route is set.
        const server = yield* Effect.gen(function*() {
          yield* inSampledSpan("outer", {})(inSampledSpan("authenticate", { "code.function.name": "x" })(statement))
          const span = yield* Effect.currentSpan
          span.attribute("http.route", "/v1/pets")
          return span
        }).pipe(
          Effect.withSpan("GET", { kind: "server", parent: caller, sampled: true }),
          Effect.withTracerEnabled(true)
        )
        yield* Effect.promise(() => receiver.waitFor(() => receiver.spans.length === 4))
        // Counted once the collector's answer is back, which can come after it holds the spans.
        yield* waitForEffect(
          Effect.sync(() => valueOf(`otel_sdk_exporter_span_exported_total{${exporter}}`) === 4),
          { what: "the four spans counted as exported", timeout: 5000 }
        )
        expect(valueOf(`otel_sdk_processor_span_processed_total{${processor}}`)).toBe(4)
        return server
      }).pipe(Effect.provide(tracingTo(receiver.endpoint)), Effect.runPromise)

      const exported = await receiver.waitFor((span) => span.kind === 2)
      expect(exported).toMatchObject({
        name: "GET /v1/pets",
        traceId,
        spanId: request.spanId,
        parentSpanId: "b7ad6b7169203331"
      })
      expect(exported.attributes["http.route"]).toBe("/v1/pets")
      expect(exported.resource).toMatchObject({
        "service.name": "sampling-test",
        "deployment.environment.name": "test"
      })
      // The exporter names itself as effect/observability's does.
      expect(receiver.userAgents[0]).toMatch(/^OTel-OTLP-Exporter-JavaScript-Effect-OtlpTracer\/\d/)
      // Timed in nanoseconds since the epoch, within the test's own span; a child inside its parent.
      const after = nanosNow() + 1000n
      expect(exported.startTimeUnixNano >= before && exported.endTimeUnixNano <= after).toBe(true)
      expect(exported.endTimeUnixNano >= exported.startTimeUnixNano).toBe(true)
      const outer = await receiver.waitFor((span) => span.name === "outer")
      expect(outer.parentSpanId).toBe(request.spanId)
      expect(outer.startTimeUnixNano >= exported.startTimeUnixNano && outer.endTimeUnixNano <= exported.endTimeUnixNano)
        .toBe(true)
      const authentication = await receiver.waitFor((span) => span.name === "authenticate")
      expect(authentication.parentSpanId).toBe(outer.spanId)
      // A statement's span is named by what it does.
      const statement = await receiver.waitFor((span) => span.kind === 3)
      expect(statement).toMatchObject({ name: "SELECT pets", parentSpanId: authentication.spanId })
      expect(statement.attributes).toMatchObject({
        "db.system": "sqlite",
        "db.operation.name": "SELECT",
        "db.collection.name": "pets",
        "db.query.text": "SELECT id, name FROM pets WHERE id = ?"
      })
      expect(receiver.spans.map((span) => span.name).sort()).toEqual([
        "GET /v1/pets",
        "SELECT pets",
        "authenticate",
        "outer"
      ])
    } finally {
      receiver.stop()
    }
  })

  it("a collector that refuses: the batch is counted by its error, new spans are held back and counted, never made, and their request's log line names no trace", async () => {
    const receiver = startOtlpReceiver()
    receiver.stop()
    const made = await Effect.gen(function*() {
      const first = yield* Effect.forEach(Array.from({ length: 3 }), () => sampledRequest("GET /v1/pets", 1))
      // The first batch's refusal pauses recording: a trace then made is dropped whole, every span counted.
      yield* waitForEffect(
        Effect.sync(() => valueOf(`otel_sdk_exporter_span_exported_total{${exporter},error_type="ECONNREFUSED"}`)),
        { what: "the refused export counted", timeout: 2000 }
      )
      expect(valueOf(`otel_sdk_exporter_span_exported_total{${exporter},error_type="ECONNREFUSED"}`))
        .toBeGreaterThanOrEqual(4)
      const later = yield* Effect.forEach(Array.from({ length: 5 }), () => sampledRequest("GET /v1/pets", 2))
      expect(later.every((span) => !span.sampled)).toBe(true)
      expect(valueOf(`otel_sdk_processor_span_processed_total{${processor},error_type="queue_full"}`)).toBe(15)
      expect(valueOf(`otel_sdk_processor_span_queue_capacity{${processor}}`)).toBe(10)
      expect(valueOf(`otel_sdk_processor_span_queue_size{${processor}}`)).toBeLessThanOrEqual(10)
      expect(valueOf(`otel_sdk_exporter_span_exported_total{${exporter}}`)).toBe(0)
      // Its request's log line names no trace: the dropped span's ids are all zero.
      const lines: Array<string> = []
      const dropped = yield* sampledRequest("GET", 0)
      const request = HttpServerRequest.fromWeb(new Request("http://petstore.test/v1/pets"))
      makeRequestLog((line) => lines.push(line))(
        new RequestRecord(request, makeClientAddress([]), performance.now(), dropped),
        "/v1/pets",
        200
      )
      expect(JSON.parse(lines[0]!).annotations).not.toHaveProperty("trace_id")
      return first
    }).pipe(Effect.provide(tracingTo(receiver.endpoint)), Effect.runPromise)
    expect(made.every((span) => span.sampled)).toBe(true)
    // The layer released, its series go with it.
    expect(valueOf(`otel_sdk_processor_span_queue_capacity{${processor}}`)).toBeUndefined()
  })

  it("a collector that asks again later (503 with Retry-After) gets the batch again, five sends at most, its spans held and counted once", async () => {
    let busyFor = 1
    const sent: Array<number> = []
    const collector = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async (request) => {
        sent.push(JSON.parse(await request.text()).resourceSpans[0].scopeSpans[0].spans.length)
        return sent.length <= busyFor
          ? new Response("busy", { status: 503, headers: { "retry-after": "0" } })
          : Response.json({})
      }
    })
    const until = (series: string, value: number) =>
      waitForEffect(Effect.sync(() => valueOf(series) === value), { what: `${series} at ${value}`, timeout: 5000 })
    try {
      await Effect.gen(function*() {
        // Two requests of two spans: one batch of four, answered 503 once, then taken.
        yield* Effect.forEach(Array.from({ length: 2 }), () => sampledRequest("GET /v1/pets", 1))
        yield* until(`otel_sdk_exporter_span_exported_total{${exporter}}`, 4)
        expect(sent).toEqual([4, 4])
        expect(valueOf(`otel_sdk_exporter_span_exported_total{${exporter}}`)).toBe(4)
        expect(valueOf(`otel_sdk_processor_span_processed_total{${processor}}`)).toBe(4)
        expect(valueOf(`otel_sdk_exporter_span_exported_total{${exporter},error_type="503"}`)).toBeUndefined()

        // Busy every time: sent five times, then counted by the answer.
        busyFor = Infinity
        yield* Effect.forEach(Array.from({ length: 2 }), () => sampledRequest("GET /v1/pets", 1))
        yield* until(`otel_sdk_exporter_span_exported_total{${exporter},error_type="503"}`, 4)
        expect(sent.slice(2)).toEqual([4, 4, 4, 4, 4])
        expect(valueOf(`otel_sdk_exporter_span_exported_total{${exporter},error_type="503"}`)).toBe(4)
        expect(valueOf(`otel_sdk_processor_span_processed_total{${processor}}`)).toBe(8)
        expect(valueOf(`otel_sdk_processor_span_queue_size{${processor}}`)).toBe(0)
      }).pipe(Effect.provide(tracingTo(`http://127.0.0.1:${collector.port}`)), Effect.runPromise)
    } finally {
      collector.stop(true)
    }
  })

  it("beyond the queue a sampled trace's spans are dropped; a collector that never answers times out, and a stop waits 3 s at most", async () => {
    const hung = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Promise<Response>(() => {}) })
    try {
      const stopping = await Effect.gen(function*() {
        // Twelve spans for a queue of ten, with no batch taken yet (every 10 s, or 20 spans).
        const requests = yield* Effect.forEach(Array.from({ length: 4 }), () => sampledRequest("GET /v1/pets", 2))
        expect(requests.map((span) => span.sampled)).toEqual([true, true, true, true])
        expect(valueOf(`otel_sdk_processor_span_queue_size{${processor}}`)).toBe(10)
        expect(valueOf(`otel_sdk_processor_span_processed_total{${processor},error_type="queue_full"}`)).toBe(2)
        return performance.now()
      }).pipe(
        Effect.provide(
          tracingTo(`http://127.0.0.1:${hung.port}`, { maxExportBatchSize: 20, scheduleDelayMillis: 10_000 }, 300)
        ),
        Effect.runPromise
      )
      expect(performance.now() - stopping).toBeLessThan(4000)

      await Effect.gen(function*() {
        yield* Effect.forEach(Array.from({ length: 2 }), () => sampledRequest("GET /v1/pets", 1))
        yield* waitForEffect(
          Effect.sync(() => valueOf(`otel_sdk_exporter_span_exported_total{${exporter},error_type="timeout"}`)),
          { what: "the timed-out export counted", timeout: 2000 }
        )
        expect(valueOf(`otel_sdk_exporter_span_exported_total{${exporter},error_type="timeout"}`)).toBe(4)
      }).pipe(Effect.provide(tracingTo(`http://127.0.0.1:${hung.port}`, {}, 300)), Effect.runPromise)
    } finally {
      hung.stop(true)
    }
  })
})
