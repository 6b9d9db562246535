import { Cause, Duration, Effect, type Exit, FiberSet, Layer, Option, References, Scope, Version } from "effect"
import { Hex } from "effect/encoding"
import { FetchHttpClient, HttpClient, HttpClientError, HttpClientRequest } from "effect/http"
import { OtlpResource, OtlpSerialization, type OtlpTracer } from "effect/observability"
import { readAtScrape } from "./Metrics.js"
import { ObservabilityConfig, type Tracing } from "./ObservabilityConfig.js"
import { type SpanKind, SpanRecorder, type TraceSpan } from "./RequestTrace.js"

type OtlpSpan = OtlpTracer.TraceData["resourceSpans"][number]["scopeSpans"][number]["spans"][number]

/** A sampled trace's span while the export can hold no more: one shared value with W3C's invalid ids, never exported. */
const dropped: TraceSpan = {
  name: "dropped",
  traceId: "0".repeat(32),
  spanId: "0".repeat(16),
  sampled: false,
  attribute() {}
}

const kinds = { internal: 1, server: 2, client: 3 } as const

/**
 * A sampled trace's span as the export holds it: plain values, made into OTLP's form only when
 * its batch is sent, off the request's path. Not `OtlpTracer`'s: its spans go to the library's
 * exporter, which bounds nothing it holds (below).
 */
class ExportedSpan implements TraceSpan {
  readonly sampled = true
  /** A key set again takes its last value. */
  readonly attributes: Record<string, unknown> = {}
  endTime = 0
  /** Kept only when the span failed: what its status and exception events are made of. */
  failure: Exit.Failure<unknown, unknown> | undefined = undefined

  constructor(
    readonly name: string,
    readonly kind: SpanKind,
    readonly traceId: string,
    readonly spanId: string,
    readonly parentSpanId: string | undefined,
    readonly startTime: number
  ) {}

  attribute(key: string, value: unknown): void {
    // Ended, it is as it will be sent.
    if (this.endTime === 0) this.attributes[key] = value
  }

  /** As OTLP carries it, with the library's status and exception events; a server span named by its method and route. */
  toOtlp(): OtlpSpan {
    const attributes: OtlpSpan["attributes"] = []
    for (const key in this.attributes) {
      attributes.push({ key, value: OtlpResource.unknownToAttributeValue(this.attributes[key]) })
    }
    const route = this.attributes["http.route"]
    let status: OtlpSpan["status"] = { code: 1 }
    const events: OtlpSpan["events"] = []
    if (this.failure !== undefined && Cause.hasInterruptsOnly(this.failure.cause)) {
      status = { code: 0 }
      attributes.push({ key: "effect.fiber.interrupted", value: { boolValue: true } })
    } else if (this.failure !== undefined) {
      for (const error of Cause.prettyErrors(this.failure.cause, { includeCauseInStack: true })) {
        if (status.code !== 2) status = { code: 2, message: error.message }
        events.push({
          name: "exception",
          timeUnixNano: unixNanos(this.endTime),
          droppedAttributesCount: 0,
          attributes: OtlpResource.entriesToAttributes([
            ["exception.type", error.name],
            ["exception.message", error.message],
            ["exception.stacktrace", error.stack ?? "No stack trace available"]
          ])
        })
      }
    }
    // Fields at their default (no events, links or drops) are left out, as OTLP's JSON allows.
    return {
      traceId: this.traceId,
      spanId: this.spanId,
      parentSpanId: this.parentSpanId,
      name: this.kind === "server" && typeof route === "string" ? `${this.name} ${route}` : this.name,
      kind: kinds[this.kind],
      startTimeUnixNano: unixNanos(this.startTime),
      endTimeUnixNano: unixNanos(this.endTime),
      attributes,
      ...(events.length > 0 && { events }),
      status
    } as OtlpSpan
  }
}

const originMicros = Math.round(performance.timeOrigin * 1000)
let lastSecond = -1
let lastSecondText = ""

/**
 * A `performance.now()` time as OTLP's nanoseconds since the epoch: whole numbers that stay exact
 * (microseconds since the epoch fit a double), the second's digits written once per second (a
 * 16-digit number written whole cost as much as the rest of the span's conversion).
 */
const unixNanos = (time: number): string => {
  const micros = time * 1000
  const whole = Math.floor(micros)
  const nanos = Math.min(999, Math.round((micros - whole) * 1000))
  const total = originMicros + whole
  const second = Math.floor(total / 1e6)
  if (second !== lastSecond) {
    lastSecond = second
    lastSecondText = String(second)
  }
  return lastSecondText + String(total - second * 1e6 + 1e6).slice(1) + String(nanos + 1000).slice(1)
}

/** The answers OTLP/HTTP asks a client to retry: the collector is overloaded or briefly unavailable. */
const retried = new Set([429, 502, 503, 504])
/** Sends of one batch at most while the collector keeps asking for it again. */
const maxSends = 5

/** A `Retry-After` in seconds, as milliseconds, 30 s at most; undefined for none, or a date. */
const retryAfterMillis = (header: string | undefined): number | undefined =>
  header !== undefined && /^\d{1,9}$/.test(header.trim()) ? Math.min(30, Number(header.trim())) * 1000 : undefined

/** A short, bounded label for a failed export: the HTTP status, the network error's code, `timeout`, or `_OTHER`. */
const errorTypeOf = (error: unknown): string => {
  const cause = HttpClientError.isHttpClientError(error) && error.reason._tag === "TransportError"
    ? error.reason.cause
    : error
  if (Cause.isTimeoutError(cause)) return "timeout"
  const code = (cause as { code?: unknown } | undefined)?.code
  return typeof code === "string" && /^[A-Za-z_]{1,40}$/.test(code) ? code : "_OTHER"
}

/**
 * The export of sampled traces' spans over OTLP/HTTP (JSON, `OtlpSerialization`'s) as the
 * `OTEL_EXPORTER_OTLP_*` variables configure it, in batches of `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` sent
 * as soon as one is full and at least every `OTEL_BSP_SCHEDULE_DELAY`; what is left is sent when the
 * layer is released, for 3 s at most.
 *
 * Not effect/observability's `OtlpExporter`, which starts an export per full batch and retries
 * each, so that while a collector is away or hung every span waits in memory until it gives up
 * (in process, 2,000 requests/s of five spans for 10 s: resident memory grew 55 MiB with a
 * collector refusing, 140 MiB with one hung). Here what is held is bounded (`Tracing.test.ts`, "a
 * collector stopped costs requests nothing"; `Sampling.test.ts`, "beyond the queue"): a span is
 * made only while fewer than `OTEL_BSP_MAX_QUEUE_SIZE` are held (open, waiting, or in a batch being
 * sent), and not for 1 s doubling to 30 s after a failed export; others, and every span below one,
 * are dropped and counted. A batch answered 429, 502, 503 or 504 (the answers OTLP/HTTP asks to
 * retry) is sent again after the collector's `Retry-After` (in seconds, 30 at most), or after that
 * pause, five sends in all, its spans held meanwhile; on any other failure, or the fifth, its spans
 * are counted by the error. Nothing is sent while paused but what is left at the layer's release.
 * Against the library's spans and exporter (`OtlpTracer`, with the guard that bounded what it
 * held), every request traced and both loaded at once (`OTEL_TRACES_SAMPLER=always_on … npm run
 * bench -- --ab 2a7f476 af9a87a --only sqlite --at-once --fresh`, 28 November 2026, two runs in
 * both orders), this answers 1.067–1.073× the requests per second on the list of 20, 1.059–1.096×
 * on get by id, 1.018–1.034× on create and 1.127–1.148× on the 401; at 1%, 0.995–1.022×.
 */
const exportingRecorder = ({ batch, defaultServiceName, exporter }: Tracing) =>
  Layer.effect(
    SpanRecorder,
    Effect.gen(function*() {
      // With none, the library reads the service's name from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
      const resource = yield* OtlpResource.fromConfig({ serviceName: defaultServiceName })
      const serialization = yield* OtlpSerialization.OtlpSerialization
      const client = yield* HttpClient.HttpClient
      const scope = { name: "effect", version: Version.getCurrentVersion() }
      // Named as effect/observability's exporter names itself, after the operator's own name, if any.
      const userAgent = [
        exporter.headers["user-agent"],
        `OTel-OTLP-Exporter-JavaScript-Effect-OtlpTracer/${scope.version}`
      ]
      const request = HttpClientRequest.post(exporter.url, {
        headers: { ...exporter.headers, "user-agent": userAgent.filter(Boolean).join(" ") }
      })

      const waiting: Array<ExportedSpan> = []
      // Spans made and not yet answered for (open, waiting, or in a batch being sent), and the counts of the export's series.
      const counts = { held: 0, handed: 0, dropped: 0, exported: 0, failed: new Map<string, number>() }
      // Batches the collector asked for again later, with how many times each was sent.
      const again: Array<{ readonly spans: Array<ExportedSpan>; readonly sends: number }> = []
      let pausedUntil = 0
      let backoffMillis = 0
      let released = false

      /** Pauses the export, for `askedMillis` (a collector's `Retry-After`) or the next backoff; batches failing together pause once. */
      const pause = (askedMillis?: number) => {
        if (Date.now() < pausedUntil) return
        backoffMillis = Math.min(30_000, Math.max(1000, backoffMillis * 2))
        pausedUntil = Date.now() + (askedMillis ?? backoffMillis)
      }

      /** Sends `spans` (their `sends`th send), answering the error's type when they were not taken; each outcome counted. */
      const send = (spans: Array<ExportedSpan>, sends: number) =>
        Effect.gen(function*() {
          const body = serialization.traces({
            resourceSpans: [{ resource, scopeSpans: [{ scope, spans: spans.map((span) => span.toOtlp()) }] }]
          })
          const withBody = HttpClientRequest.setBody(request, body)
          const response =
            yield* (exporter.gzip ? HttpClientRequest.compressBody(withBody, "gzip") : Effect.succeed(withBody)).pipe(
              Effect.flatMap(client.execute),
              Effect.tap((response) => Effect.ignore(response.arrayBuffer)),
              Effect.timeout(Duration.millis(exporter.timeoutMillis))
            )
          if (response.status >= 200 && response.status < 300) return undefined
          if (retried.has(response.status) && sends < maxSends && !released) {
            again.push({ spans, sends: sends + 1 })
            pause(retryAfterMillis(response.headers["retry-after"]))
            return null
          }
          return String(response.status)
        }).pipe(
          Effect.catchCause((cause) => Effect.succeed(errorTypeOf(Cause.squash(cause)))),
          Effect.map((errorType) => {
            if (errorType === null) return undefined
            counts.held -= spans.length
            if (errorType === undefined) {
              counts.exported += spans.length
              backoffMillis = pausedUntil = 0
              return errorType
            }
            counts.failed.set(errorType, (counts.failed.get(errorType) ?? 0) + spans.length)
            pause()
            return errorType
          }),
          // Effect's tracing is off for the export too: no span of its own, no traceparent sent.
          Effect.withTracerEnabled(false)
        )

      const noteFailure = yield* exportSeries(batch.maxQueueSize, counts)
      const exports = yield* FiberSet.make<void>()
      const fork = yield* FiberSet.runtime(exports)<never>()
      /** Sends the next batch, one asked for again first, else taken now from the waiting spans; nothing while paused or when none wait. */
      const sendNext = () => {
        if (Date.now() < pausedUntil) return
        const retry = again.shift()
        const spans = retry?.spans ?? waiting.splice(0, batch.maxExportBatchSize)
        if (retry === undefined) counts.handed += spans.length
        // After a yield: the fork runs at once, and the batch is not the ending request's work.
        if (spans.length > 0) {
          fork(Effect.andThen(Effect.yieldNow, Effect.flatMap(send(spans, retry?.sends ?? 1), noteFailure)))
        }
      }

      yield* Effect.sleep(Duration.millis(batch.scheduleDelayMillis)).pipe(
        Effect.andThen(Effect.sync(sendNext)),
        Effect.forever,
        Effect.forkScoped
      )
      yield* Effect.addFinalizer(() =>
        Effect.suspend(() => {
          // What is left is sent once now, pause or not.
          released = true
          pausedUntil = 0
          while (again.length > 0 || waiting.length > 0) sendNext()
          return FiberSet.awaitEmpty(exports)
        }).pipe(Effect.timeoutOption(Duration.seconds(3)))
      )

      const refuse = () => {
        counts.dropped++
        return dropped
      }
      return SpanRecorder.of({
        start: (name, kind, parent, startTime) => {
          if (parent === dropped || counts.held >= batch.maxQueueSize) return refuse()
          if (pausedUntil !== 0) {
            if (Date.now() < pausedUntil) return refuse()
            pausedUntil = 0
          }
          counts.held++
          const traceId = parent === undefined ? Hex.random(32) : parent.traceId
          return new ExportedSpan(name, kind, traceId, Hex.random(16), parent?.spanId, startTime)
        },
        end: (span, endTime, exit) => {
          if (!(span instanceof ExportedSpan) || span.endTime !== 0) return
          span.endTime = endTime
          if (exit._tag === "Failure") span.failure = exit
          waiting.push(span)
          if (waiting.length >= batch.maxExportBatchSize) sendNext()
        }
      })
    })
  ).pipe(Layer.provide([OtlpSerialization.layerJson, FetchHttpClient.layer]))

const processor = { otel_component_type: "batching_span_processor" }
const exporterLabel = { otel_component_type: "otlp_http_json_span_exporter" }
const processed = [
  "otel_sdk_processor_span_processed_total",
  "Ended spans handed to the exporter, or dropped because the export could hold no more (error_type=\"queue_full\")"
] as const
const exported = [
  "otel_sdk_exporter_span_exported_total",
  "Spans sent to the OTLP receiving end: taken, or not taken by their batch's export (error_type)"
] as const

/**
 * The export's counts under OpenTelemetry's SDK metric names, read at each scrape while the tracer
 * lasts. Answers how to add the series of an export's error type, once seen (nothing for none).
 */
const exportSeries = (capacity: number, counts: {
  readonly held: number
  readonly handed: number
  readonly dropped: number
  readonly exported: number
  readonly failed: ReadonlyMap<string, number>
}) =>
  Effect.gen(function*() {
    const queue = "Spans held for export: open, waiting for their batch, or in one being sent"
    yield* readAtScrape("gauge", "otel_sdk_processor_span_queue_size", queue, processor, () => counts.held)
    const limit = "Spans held for export at most (OTEL_BSP_MAX_QUEUE_SIZE); beyond it they are dropped"
    yield* readAtScrape("gauge", "otel_sdk_processor_span_queue_capacity", limit, processor, () => capacity)
    yield* readAtScrape("counter", ...processed, processor, () => counts.handed)
    yield* readAtScrape("counter", ...processed, { ...processor, error_type: "queue_full" }, () => counts.dropped)
    yield* readAtScrape("counter", ...exported, exporterLabel, () => counts.exported)
    const scope = yield* Scope.Scope
    const seen = new Set<string>()
    return (errorType: string | undefined): Effect.Effect<void> => {
      if (errorType === undefined || seen.has(errorType)) return Effect.void
      seen.add(errorType)
      const failed = () => counts.failed.get(errorType) ?? 0
      const series = readAtScrape("counter", ...exported, { ...exporterLabel, error_type: errorType }, failed)
      return Effect.provideService(series, Scope.Scope, scope)
    }
  })

/** Effect's own tracing off: the spans libraries open (effect/sql's per statement) are never made. */
const effectTracingOff = Layer.succeed(References.TracerEnabled)(false)

/**
 * The request traces' spans exported over OTLP when an endpoint is configured (`SpanRecorder`),
 * and Effect's tracing off in any case: a request's spans are its trace's (`RequestTrace.ts`).
 */
export const TracingLive: Layer.Layer<never, never, ObservabilityConfig> = Layer.unwrap(
  Effect.map(ObservabilityConfig, ({ tracing }) =>
    Option.match(tracing, {
      onNone: () => effectTracingOff,
      onSome: (tracing) => Layer.merge(effectTracingOff, exportingRecorder(tracing))
    }))
)
