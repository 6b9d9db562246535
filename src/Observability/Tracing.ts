import { Cause, Duration, Effect, type Exit, FiberSet, Layer, Option, References, Scope, Version } from "effect"
import { Hex } from "effect/encoding"
import { FetchHttpClient, HttpClient, HttpClientError, HttpClientRequest } from "effect/http"
import { OtlpResource, OtlpSerialization, type OtlpTracer } from "effect/observability"
import { readAtScrape } from "./Metrics.js"
import { ObservabilityConfig, type Tracing } from "./ObservabilityConfig.js"
import { type SpanKind, SpanRecorder, type TraceSpan } from "./RequestTrace.js"

type OtlpSpan = OtlpTracer.TraceData["resourceSpans"][number]["scopeSpans"][number]["spans"][number]

/** A sampled trace's span while the export can hold no more: one shared value, counted and never made. */
const dropped: TraceSpan = {
  name: "dropped",
  // The W3C invalid ids: a call made under it would start no trace elsewhere.
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

  /** As OTLP carries it; a server span named by its method and route once the request set `http.route`. */
  toOtlp(): OtlpSpan {
    const attributes: OtlpSpan["attributes"] = []
    for (const key in this.attributes) attributes.push({ key, value: OtlpResource.unknownToAttributeValue(this.attributes[key]) })
    const route = this.attributes["http.route"]
    let status: OtlpSpan["status"] = { code: 1 }
    const events: OtlpSpan["events"] = []
    if (this.failure !== undefined) {
      if (Cause.hasInterruptsOnly(this.failure.cause)) {
        status = { code: 0 }
        attributes.push({ key: "effect.fiber.interrupted", value: { boolValue: true } })
      } else {
        const errors = Cause.prettyErrors(this.failure.cause, { includeCauseInStack: true })
        if (errors.length > 0) status = { code: 2, message: errors[0]!.message }
        for (const error of errors) {
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

/** A short, bounded label for a failed export: the HTTP status, the network error's code, `timeout`, or `_OTHER`. */
const errorTypeOf = (error: unknown): string => {
  const cause = HttpClientError.isHttpClientError(error) && error.reason._tag === "TransportError" ? error.reason.cause : error
  if (Cause.isTimeoutError(cause)) return "timeout"
  const code = (cause as { code?: unknown } | undefined)?.code
  return typeof code === "string" && /^[A-Za-z_]{1,40}$/.test(code) ? code : "_OTHER"
}

const minBackoffMillis = 1000
const maxBackoffMillis = 30_000

/**
 * The export of sampled traces' spans over OTLP/HTTP (JSON, `OtlpSerialization`'s), to the
 * endpoint of the standard `OTEL_EXPORTER_OTLP_*` variables with their headers, timeout (each
 * attempt's) and compression, in batches of `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` sent as soon as one
 * is full and at least every `OTEL_BSP_SCHEDULE_DELAY`. Spans still held are sent when the layer
 * is released, for 3 s at most.
 *
 * Not effect/observability's `OtlpExporter`, which starts an export per full batch and retries
 * each, so that while a collector is away or hung every span waits in memory until it gives up
 * (in process, 2,000 requests/s of five spans for 10 s: resident memory grew 55 MiB with a
 * collector refusing, 140 MiB with one hung). Here what is held is bounded
 * (`Tracing.test.ts`, "a collector stopped costs requests nothing"; `Sampling.test.ts`, "beyond
 * the queue"): a span is made only while fewer than `OTEL_BSP_MAX_QUEUE_SIZE` are held (open,
 * waiting, or in a batch being sent), and not for 1 s doubling to 30 s after a failed export;
 * others, and every span below one, are dropped and counted. A failed batch is not sent again:
 * its spans are counted by the error.
 */
const exportingRecorder = (tracing: Tracing) =>
  Layer.effect(
    SpanRecorder,
    Effect.gen(function*() {
      const { batch, exporter } = tracing
      const resource = yield* OtlpResource.fromConfig(
        // Otherwise read by the library from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
        tracing.defaultServiceName === undefined ? undefined : { serviceName: tracing.defaultServiceName }
      )
      const serialization = yield* OtlpSerialization.OtlpSerialization
      const client = yield* HttpClient.HttpClient
      // Named as effect/observability's exporter names itself, after the operator's own name, if any.
      const userAgent = `OTel-OTLP-Exporter-JavaScript-Effect-OtlpTracer/${Version.getCurrentVersion()}`
      const request = HttpClientRequest.post(exporter.url, {
        headers: {
          ...exporter.headers,
          "user-agent": exporter.headers["user-agent"] === undefined ? userAgent : `${exporter.headers["user-agent"]} ${userAgent}`
        }
      })
      const scope = { name: "effect", version: Version.getCurrentVersion() }

      const waiting: Array<ExportedSpan> = []
      // Spans made and not yet answered for: open, waiting for their batch, or in one being sent.
      let held = 0
      let pausedUntil = 0
      let backoffMillis = 0
      let handed = 0
      let droppedSpans = 0
      let exported = 0
      // One entry per error type seen: a few HTTP statuses and network codes.
      const failed = new Map<string, number>()

      const send = (spans: Array<ExportedSpan>) =>
        Effect.gen(function*() {
          const body = serialization.traces({
            resourceSpans: [{ resource, scopeSpans: [{ scope, spans: spans.map((span) => span.toOtlp()) }] }]
          })
          const withBody = HttpClientRequest.setBody(request, body)
          const response = yield* (exporter.gzip ? HttpClientRequest.compressBody(withBody, "gzip") : Effect.succeed(withBody)).pipe(
            Effect.flatMap(client.execute),
            Effect.tap((response) => Effect.ignore(response.arrayBuffer)),
            Effect.timeout(Duration.millis(exporter.timeoutMillis))
          )
          if (response.status < 200 || response.status >= 300) return String(response.status)
          return undefined
        }).pipe(
          Effect.catchCause((cause) => Effect.succeed(errorTypeOf(Cause.squash(cause)))),
          Effect.map((errorType) => {
            held -= spans.length
            if (errorType === undefined) {
              exported += spans.length
              backoffMillis = 0
              pausedUntil = 0
            } else {
              failed.set(errorType, (failed.get(errorType) ?? 0) + spans.length)
              // Batches sent together and failing together pause once, not once each.
              const now = Date.now()
              if (now >= pausedUntil) {
                backoffMillis = Math.min(maxBackoffMillis, Math.max(minBackoffMillis, backoffMillis * 2))
                pausedUntil = now + backoffMillis
              }
            }
            return errorType
          }),
          // Effect's tracing is off for the export too: no span of its own, no traceparent sent.
          Effect.withTracerEnabled(false)
        )

      /** The next batch, taken from the waiting spans; empty when none wait. */
      const nextBatch = (): Array<ExportedSpan> => {
        const spans = waiting.splice(0, batch.maxExportBatchSize)
        handed += spans.length
        return spans
      }

      const noteFailure = yield* exportSeries({
        held: () => held,
        capacity: () => batch.maxQueueSize,
        handed: () => handed,
        dropped: () => droppedSpans,
        exported: () => exported,
        failed: (errorType) => failed.get(errorType) ?? 0
      })
      const exports = yield* FiberSet.make<void>()
      const fork = yield* FiberSet.runtime(exports)<never>()
      /** Sends the next batch, taken now; nothing when no span waits. */
      const sendNext = () => {
        const spans = nextBatch()
        if (spans.length > 0) {
          // After a yield: the fork runs at once, and the batch is not the ending request's work.
          fork(Effect.andThen(
            Effect.yieldNow,
            Effect.flatMap(send(spans), (errorType) => errorType === undefined ? Effect.void : noteFailure(errorType))
          ))
        }
      }

      yield* Effect.sleep(Duration.millis(batch.scheduleDelayMillis)).pipe(
        Effect.andThen(Effect.sync(sendNext)),
        Effect.forever,
        Effect.forkScoped
      )
      yield* Effect.addFinalizer(() =>
        Effect.suspend(() => {
          while (waiting.length > 0) sendNext()
          return FiberSet.awaitEmpty(exports)
        }).pipe(Effect.timeoutOption(Duration.seconds(3)))
      )

      const refuse = () => {
        droppedSpans++
        return dropped
      }
      return SpanRecorder.of({
        start: (name, kind, parent, startTime) => {
          if (parent === dropped) return refuse()
          if (pausedUntil !== 0) {
            if (Date.now() < pausedUntil) return refuse()
            pausedUntil = 0
          }
          if (held >= batch.maxQueueSize) return refuse()
          held++
          return new ExportedSpan(
            name,
            kind,
            parent === undefined ? Hex.random(32) : parent.traceId,
            Hex.random(16),
            parent?.spanId,
            startTime
          )
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
const processedHelp =
  "Ended spans handed to the exporter, or dropped because the export could hold no more (error_type=\"queue_full\")"
const exportedHelp = "Spans sent to the OTLP receiving end: taken, or not taken by their batch's export (error_type)"

/**
 * The export's counts under OpenTelemetry's SDK metric names, read at each scrape while the
 * tracer lasts. Answers how to add the series of an error type, once seen.
 */
const exportSeries = (counts: {
  readonly held: () => number
  readonly capacity: () => number
  readonly handed: () => number
  readonly dropped: () => number
  readonly exported: () => number
  readonly failed: (errorType: string) => number
}) =>
  Effect.gen(function*() {
    const counter = (name: string, help: string, attributes: Record<string, string>, read: () => number) =>
      readAtScrape("counter", name, help, attributes, read)
    yield* readAtScrape(
      "gauge",
      "otel_sdk_processor_span_queue_size",
      "Spans held for export: open, waiting for their batch, or in one being sent",
      processor,
      counts.held
    )
    yield* readAtScrape(
      "gauge",
      "otel_sdk_processor_span_queue_capacity",
      "Spans held for export at most (OTEL_BSP_MAX_QUEUE_SIZE); beyond it they are dropped",
      processor,
      counts.capacity
    )
    yield* counter("otel_sdk_processor_span_processed_total", processedHelp, processor, counts.handed)
    yield* counter("otel_sdk_processor_span_processed_total", processedHelp, { ...processor, error_type: "queue_full" }, counts.dropped)
    yield* counter("otel_sdk_exporter_span_exported_total", exportedHelp, exporterLabel, counts.exported)
    const scope = yield* Scope.Scope
    const seen = new Set<string>()
    return (errorType: string): Effect.Effect<void> => {
      if (seen.has(errorType)) return Effect.void
      seen.add(errorType)
      return counter("otel_sdk_exporter_span_exported_total", exportedHelp, { ...exporterLabel, error_type: errorType }, () =>
        counts.failed(errorType)).pipe(Effect.provideService(Scope.Scope, scope))
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
