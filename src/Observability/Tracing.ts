import {
  Cause,
  Context,
  Effect,
  Exit,
  type Fiber,
  FiberSet,
  Layer,
  Option,
  References,
  Scope,
  Tracer,
  Version
} from "effect"
import { FetchHttpClient, HttpClient, HttpClientError, HttpClientRequest } from "effect/http"
import { OtlpResource, OtlpSerialization, type OtlpTracer } from "effect/observability"
import { readAtScrape } from "./Metrics.js"
import { ObservabilityConfig, type Tracing } from "./ObservabilityConfig.js"

type OtlpSpan = OtlpTracer.TraceData["resourceSpans"][number]["scopeSpans"][number]["spans"][number]

/** A span the export could not hold, and the work below it: W3C's invalid ids (no trace named), never exported. */
const dropped: Tracer.Span = {
  _tag: "Span",
  name: "dropped",
  spanId: "0".repeat(16),
  traceId: "0".repeat(32),
  parent: Option.none(),
  annotations: Context.empty(),
  status: { _tag: "Ended", startTime: 0n, endTime: 0n, exit: Exit.void },
  attributes: new Map(),
  links: [],
  sampled: false,
  kind: "internal",
  end() {},
  attribute() {},
  event() {},
  addLinks() {}
}

/** A span that stands for `span` to the work below it, and is not itself exported. */
const transparent = (span: Tracer.Span): Tracer.Span => ({
  ...dropped,
  name: "transparent",
  spanId: span.spanId,
  traceId: span.traceId,
  parent: Option.some(span),
  sampled: span.sampled
})

const originMicros = Math.round(performance.timeOrigin * 1000)
let second = -1
let secondText = ""

/** A `performance.now()` time as OTLP's epoch nanoseconds, to the µs; a 16-digit number written whole is slow. */
const unixNanos = (time: number) => {
  const micros = originMicros + Math.round(time * 1000)
  const seconds = Math.floor(micros / 1e6)
  if (seconds !== second) {
    second = seconds
    secondText = String(seconds)
  }
  return `${secondText}${String(micros - seconds * 1e6 + 1e6).slice(1)}000`
}

const kinds = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const

/** A sampled span as the export holds it: made OTLP's form only when its batch is sent. */
class ExportedSpan extends Tracer.NativeSpan {
  // A plain object, not the library's Map behind its status check: the service sets a few attributes on every span.
  private readonly values: Record<string, unknown> = {}
  private open = true
  // Timed here, as numbers: Effect's timing (bigint nanoseconds, made and written out) is off with the tracer.
  private readonly startedAt = performance.now()
  private endedAt = 0

  constructor(options: Parameters<Tracer.Tracer["span"]>[0], private readonly ended: (span: ExportedSpan) => void) {
    super(options)
  }

  override attribute(key: string, value: unknown): void {
    if (this.open) this.values[key] = value
  }

  override get attributes(): Map<string, unknown> {
    return new Map(Object.entries(this.values))
  }

  // The service publishes no events (a log's, held until the batch is sent) or links.
  override event(): void {}
  override addLinks(): void {}

  override end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    if (!this.open) return
    this.open = false
    this.endedAt = performance.now()
    // Only a failure is exported: a success's value is not held until the batch is sent.
    super.end(endTime, Exit.isSuccess(exit) ? Exit.void : exit)
    this.ended(this)
  }

  /** As OTLP carries it, with the library's status and exception events; a server span named by method and route. */
  toOtlp(): OtlpSpan {
    const attributes = OtlpResource.entriesToAttributes(Object.entries(this.values))
    const { status: ended } = this
    const endTime = unixNanos(this.endedAt)
    const failure = ended._tag === "Ended" && Exit.isFailure(ended.exit) ? ended.exit : undefined
    const route = this.values["http.route"]
    let status: OtlpSpan["status"] = { code: 1 }
    const events: OtlpSpan["events"] = []
    if (failure !== undefined && Cause.hasInterruptsOnly(failure.cause)) {
      status = { code: 0 }
      attributes.push({ key: "effect.fiber.interrupted", value: { boolValue: true } })
    } else if (failure !== undefined) {
      for (const error of Cause.prettyErrors(failure.cause, { includeCauseInStack: true })) {
        if (status.code !== 2) status = { code: 2, message: error.message }
        events.push({
          name: "exception",
          timeUnixNano: endTime,
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
      parentSpanId: Option.isSome(this.parent) ? this.parent.value.spanId : undefined,
      name: this.kind === "server" && typeof route === "string" ? `${this.name} ${route}` : this.name,
      kind: kinds[this.kind],
      startTimeUnixNano: unixNanos(this.startedAt),
      endTimeUnixNano: endTime,
      attributes,
      ...(events.length > 0 && { events }),
      status
    } as OtlpSpan
  }
}

/** The answers OTLP/HTTP asks a client to retry: the collector is overloaded or briefly unavailable. */
const retried = new Set([429, 502, 503, 504])
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
 * Effect's sampled spans, batched over OTLP/HTTP. Not effect/observability's exporter, which holds all while a
 * collector is away: at most `OTEL_BSP_MAX_QUEUE_SIZE`, none while paused after a failure, the rest dropped, counted.
 */
const exportingTracer = ({ batch, defaultServiceName, exporter }: Tracing) =>
  Effect.gen(function*() {
    // With none, the library reads the service's name from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
    const resource = yield* OtlpResource.fromConfig({ serviceName: defaultServiceName })
    const serialization = yield* OtlpSerialization.OtlpSerialization
    const client = yield* HttpClient.HttpClient
    const scope = { name: "effect", version: Version.getCurrentVersion() }
    // Named as effect/observability's exporter names itself, after the operator's own name, if any.
    const library = `OTel-OTLP-Exporter-JavaScript-Effect-OtlpTracer/${scope.version}`
    const userAgent = [exporter.headers["user-agent"], library].filter(Boolean).join(" ")
    const request = HttpClientRequest.post(exporter.url, { headers: { ...exporter.headers, "user-agent": userAgent } })

    const waiting: Array<ExportedSpan> = []
    // `held`: spans made and not yet answered for (open, waiting, or in a batch being sent).
    const counts = { held: 0, handed: 0, dropped: 0, exported: 0, failed: new Map<string, number>() }
    // Batches the collector asked for again later, with how many times each was sent.
    const again: Array<{ readonly spans: Array<ExportedSpan>; readonly sends: number }> = []
    let pausedUntil = 0
    let backoffMillis = 0
    let released = false

    const queue = "Spans held for export: open, waiting for their batch, or in one being sent"
    yield* readAtScrape("gauge", "otel_sdk_processor_span_queue_size", queue, processor, () => counts.held)
    const limit = "Spans held for export at most (OTEL_BSP_MAX_QUEUE_SIZE); beyond it they are dropped"
    yield* readAtScrape("gauge", "otel_sdk_processor_span_queue_capacity", limit, processor, () => batch.maxQueueSize)
    yield* readAtScrape("counter", ...processed, processor, () => counts.handed)
    yield* readAtScrape("counter", ...processed, { ...processor, error_type: "queue_full" }, () => counts.dropped)
    yield* readAtScrape("counter", ...exported, exporterLabel, () => counts.exported)
    const seriesScope = yield* Scope.Scope
    const noteFailure = (errorType: string): Effect.Effect<void> => {
      if (counts.failed.has(errorType)) return Effect.void
      const failed = () => counts.failed.get(errorType) ?? 0
      const series = readAtScrape("counter", ...exported, { ...exporterLabel, error_type: errorType }, failed)
      return Effect.provideService(series, Scope.Scope, seriesScope)
    }

    /** For a collector's `Retry-After`, else the next backoff; batches failing together pause once. */
    const pause = (askedMillis?: number) => {
      if (Date.now() < pausedUntil) return
      backoffMillis = Math.min(30_000, Math.max(1000, backoffMillis * 2))
      pausedUntil = Date.now() + (askedMillis ?? backoffMillis)
    }

    /** Counts the outcome of `spans`' `sends`th send; answers the error's type when they were not taken. */
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
            Effect.timeout(exporter.timeoutMillis)
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
        Effect.flatMap((errorType) => {
          if (errorType === null) return Effect.void
          counts.held -= spans.length
          if (errorType === undefined) {
            counts.exported += spans.length
            backoffMillis = pausedUntil = 0
            return Effect.void
          }
          const note = noteFailure(errorType)
          counts.failed.set(errorType, (counts.failed.get(errorType) ?? 0) + spans.length)
          pause()
          return note
        }),
        // No span of its own, no traceparent sent.
        Effect.withTracerEnabled(false)
      )

    const exports = yield* FiberSet.make<void>()
    const fork = yield* FiberSet.runtime(exports)<never>()
    /** The next batch, one asked for again first, else the waiting spans; nothing while paused or when none wait. */
    const sendNext = () => {
      if (Date.now() < pausedUntil) return
      const retry = again.shift()
      const spans = retry?.spans ?? waiting.splice(0, batch.maxExportBatchSize)
      if (retry === undefined) counts.handed += spans.length
      // After a yield: the fork runs at once, and the batch is not the ending request's work.
      if (spans.length > 0) fork(Effect.andThen(Effect.yieldNow, send(spans, retry?.sends ?? 1)))
    }

    yield* Effect.sleep(batch.scheduleDelayMillis).pipe(
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
      }).pipe(Effect.timeoutOption("3 seconds"))
    )

    const ended = (span: ExportedSpan) => {
      waiting.push(span)
      if (waiting.length >= batch.maxExportBatchSize) sendNext()
    }
    const refuse = () => {
      counts.dropped++
      return dropped
    }
    return Tracer.make({
      span: (options) => {
        const { kind, name, parent } = options
        // effect/sql's statement and nested transaction spans stand aside for the service's (`Sql/StatementSpans.ts`).
        if (kind === "client" && (name === "sqlite" || name === "postgresql")) return dropped
        if (name === "sql.transaction" && Option.isSome(parent) && parent.value._tag === "Span") {
          const around = parent.value
          if (around.name === "sql.transaction") return transparent(around)
        }
        if (!options.sampled || counts.held >= batch.maxQueueSize) return refuse()
        if (pausedUntil !== 0) {
          if (Date.now() < pausedUntil) return refuse()
          pausedUntil = 0
        }
        counts.held++
        return new ExportedSpan(options, ended)
      }
    })
  }).pipe(Effect.provide([OtlpSerialization.layerJson, FetchHttpClient.layer]))

/** Effect's tracing off for the whole service but a sampled request (`Http/RequestObserver.ts`); the tracer above. */
export const TracingLive: Layer.Layer<never, never, ObservabilityConfig> = Layer.unwrap(
  Effect.map(ObservabilityConfig, ({ tracing }) => {
    const off = Layer.succeed(References.TracerEnabled)(false)
    return Option.match(tracing, {
      onNone: () => off,
      onSome: (tracing) =>
        Layer.mergeAll(
          off,
          Layer.succeed(References.TracerTimingEnabled)(false),
          Layer.effect(Tracer.Tracer)(exportingTracer(tracing))
        )
    })
  })
)

/** The time given to a span: the exported spans time themselves, as with Effect's `TracerTimingEnabled` off. */
export const untimed = BigInt(0)

/** A span named `name` below `fiber`'s current one, started now, in a sampled request; undefined otherwise. */
export const startChildSpan = (fiber: Fiber.Fiber<unknown, unknown>, name: string, kind: Tracer.SpanKind) => {
  const parent = fiber.cache.span
  if (!fiber.cache.tracerEnabled || parent === undefined) return undefined
  const span = fiber.getRef(Tracer.Tracer).span({
    name,
    parent: Option.some(parent),
    annotations: Context.empty(),
    links: [],
    startTime: untimed,
    kind,
    root: false,
    sampled: parent.sampled
  })
  return { span, end: (exit: Exit.Exit<unknown, unknown>) => span.end(untimed, exit) }
}

/**
 * `effect` in a span in a sampled request. Not `Effect.withSpan`, which makes a no-op span per call outside one
 * ([benchmarks](../../docs/benchmarks.md#what-observability-costs)).
 */
export const inSampledSpan = (
  name: string,
  attributes: Readonly<Record<string, unknown>>,
  exitOf: (exit: Exit.Exit<unknown, unknown>) => Exit.Exit<unknown, unknown> = (exit) => exit
) => {
  const entries = Object.entries(attributes)
  return <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.withFiber((fiber) => {
      const child = startChildSpan(fiber, name, "internal")
      if (child === undefined) return effect
      for (const [key, value] of entries) child.span.attribute(key, value)
      return Effect.onExitPrimitive(Effect.provideService(effect, Tracer.ParentSpan, child.span), (exit) => {
        child.end(exitOf(exit))
        return undefined
      })
    })
}
