import { Cause, Context, Effect, Exit, Layer, Option, Tracer } from "effect"
import { addCollector } from "./Exposition.js"
import { ObservabilityConfig, type OtlpExporter, type Tracing } from "./ObservabilityConfig.js"
import { type ExportedSpan, exportRequest, keyValues, spanJson } from "./OtlpJson.js"
import { type ExportOutcome, makeSpanQueue } from "./SpanQueue.js"
import { CallerTraceState } from "./TraceContext.js"

/** Random lowercase hex of `words` 32-bit words: 2 for a span id, 4 for a trace id. */
const randomHex = (words: number) => {
  let hex = ""
  for (let i = 0; i < words; i++) hex += ((Math.random() * 0x100000000) >>> 0).toString(16).padStart(8, "0")
  return hex
}

/** Events kept per span at most, OpenTelemetry's default limit: a loop logging in a span stays bounded. */
const maxEvents = 128

/** A span of a sampled trace: a few fields and its attributes, handed to the export queue when it ends. */
class RecordedSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly sampled = true
  readonly spanId = randomHex(2)
  readonly attributes = new Map<string, unknown>()
  status: Tracer.SpanStatus
  events: Array<readonly [name: string, time: bigint, attributes: Record<string, unknown> | undefined]> = []
  droppedEvents = 0

  constructor(
    readonly name: string,
    readonly traceId: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly traceState: string | undefined,
    readonly context: Context.Context<never>,
    readonly links: Array<Tracer.SpanLink>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind,
    private readonly ended: (span: RecordedSpan) => void
  ) {
    this.status = { _tag: "Started", startTime }
  }

  attribute(key: string, value: unknown) {
    this.attributes.set(key, value)
  }

  event(name: string, startTime: bigint, attributes?: Record<string, unknown>) {
    if (this.events.length < maxEvents) this.events.push([name, startTime, attributes])
    else this.droppedEvents++
  }

  addLinks(links: ReadonlyArray<Tracer.SpanLink>) {
    this.links.push(...links)
  }

  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>) {
    if (this.status._tag === "Ended") return
    this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
    this.ended(this)
  }
}

const invalidTraceId = "0".repeat(32)
const invalidSpanId = "0".repeat(16)

/**
 * A span of a trace not sampled: nothing is recorded, and its ids are its parent's, so a call
 * made under it would pass the caller's `traceparent` on unchanged (all zeros, the W3C invalid
 * ids, when the trace began here).
 */
class UnsampledSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly sampled = false
  readonly traceId: string
  readonly spanId: string
  readonly attributes = new Map<string, unknown>()
  readonly links = []
  status: Tracer.SpanStatus

  constructor(
    readonly name: string,
    from: Tracer.AnySpan | undefined,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Context.Context<never>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind
  ) {
    this.traceId = from?.traceId ?? invalidTraceId
    this.spanId = from?.spanId ?? invalidSpanId
    this.status = { _tag: "Started", startTime }
  }

  attribute() {}
  event() {}
  addLinks() {}
  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>) {
    if (this.status._tag === "Started") this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
  }
}

/**
 * Effect's tracer for this service. A trace is sampled once, where it enters, before any span is
 * made: the request observer asks the sampler (`Sampler.ts`) and opens a server span only for a
 * sampled request, with the caller's span as parent (an external span) or as a root (`root: true`).
 * Such a span is recorded, and every span below follows its parent. A span without a parent
 * otherwise is background work, or one opened in a request that was not sampled (which runs with
 * no span): neither is recorded, and no fiber reference has to change to say so. A span of a
 * sampled trace is recorded and queued for export when it ends. Unlike
 * `@effect/opentelemetry`'s tracer it wraps no fiber step in an OpenTelemetry context: nothing in
 * the service reads one, and that wrap cost every request that ran under a span.
 */
export const makeTracer = (ended: (span: RecordedSpan) => void): Tracer.Tracer =>
  Tracer.make({
    span(name, parent, context, links, startTime, kind, options) {
      const from = Option.getOrUndefined(parent)
      const sampled = from === undefined ? options?.root === true : from._tag === "ExternalSpan" || from.sampled
      if (!sampled) return new UnsampledSpan(name, from, parent, context, startTime, kind)
      const traceState = from === undefined
        ? undefined
        : from._tag === "ExternalSpan"
        ? Context.getOption(from.context, CallerTraceState).pipe(Option.getOrUndefined)
        : from instanceof RecordedSpan
        ? from.traceState
        : undefined
      return new RecordedSpan(name, from?.traceId ?? randomHex(4), parent, traceState, context, links.slice(), startTime, kind, ended)
    },
    context: (execution) => execution()
  })

const nowNanos = () => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6))

/**
 * `effect` in a child span of `parent`, a span of a sampled trace. The span is made by the tracer
 * directly, without `Effect.withSpan`'s reads of span annotations, links and clock, which cost
 * more than the span.
 */
export const inChildSpan = <A, E, R>(
  tracer: Tracer.Tracer,
  parent: Tracer.AnySpan,
  name: string,
  kind: Tracer.SpanKind,
  attributes: Readonly<Record<string, unknown>>,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => {
  const span = tracer.span(name, Option.some(parent), Context.empty(), [], nowNanos(), kind, spanOptions)
  for (const key in attributes) span.attribute(key, attributes[key])
  return Effect.onExit(Effect.withParentSpan(effect, span), (exit) => {
    span.end(nowNanos(), exit)
    return Effect.void
  })
}
const spanOptions = { captureStackTrace: false } as const

/**
 * `effect` in a child span of the running one when that span's trace is sampled, and as it is
 * otherwise: a request not sampled then pays one check, not a span and a context to make.
 */
export const withSampledSpan = (name: string, attributes: Readonly<Record<string, unknown>>) =>
<A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.withFiberRuntime<A, E, R>((fiber) => {
    const parent = fiber.currentSpan
    return parent?.sampled === true ? inChildSpan(fiber.currentTracer, parent, name, "internal", attributes, effect) : effect
  })

// OTLP's numbering, 0 being unspecified.
const spanKinds: Record<Tracer.SpanKind, number> = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 }

/** OpenTelemetry's span status and exception event for how the span's effect ended. */
const outcomeOf = (exit: Exit.Exit<unknown, unknown>, endTime: bigint) => {
  if (Exit.isSuccess(exit)) return okOutcome
  if (Cause.isInterruptedOnly(exit.cause)) return interruptedOutcome
  const error = Cause.squash(exit.cause)
  const message = error instanceof Error ? error.message : String(error)
  const type = error instanceof Error ? ((error as { _tag?: string })._tag ?? error.name) : typeof error
  const attributes: Array<readonly [string, unknown]> = [["exception.type", type], ["exception.message", message]]
  // A defect's trace says where; a failure the API expects (401, 404) has nothing to add.
  if (Cause.isDie(exit.cause)) attributes.push(["exception.stacktrace", Cause.pretty(exit.cause)])
  return { status: { code: 2, message }, events: [{ name: "exception", time: endTime, attributes }], attributes: [] }
}
const okOutcome = { status: { code: 1 }, events: [], attributes: [] }
const interruptedOutcome = { status: { code: 1 }, events: [], attributes: [["status.interrupted", true] as const] }

/** A recorded span as it is encoded for export. */
const exportedSpan = (span: RecordedSpan): ExportedSpan => {
  if (span.status._tag !== "Ended") throw new Error("only an ended span is exported")
  const { endTime, exit, startTime } = span.status
  const parent = Option.getOrUndefined(span.parent)
  const outcome = outcomeOf(exit, endTime)
  return {
    traceId: span.traceId,
    spanId: span.spanId,
    parentSpanId: parent?.spanId,
    parentIsRemote: parent?._tag === "ExternalSpan",
    traceState: span.traceState,
    name: span.name,
    kind: spanKinds[span.kind],
    startTime,
    endTime,
    attributes: outcome.attributes.length === 0 ? span.attributes : [...span.attributes, ...outcome.attributes],
    events: [
      ...span.events.map(([name, time, attributes]) => ({ name, time, attributes: Object.entries(attributes ?? {}) })),
      ...outcome.events
    ],
    droppedEventsCount: span.droppedEvents,
    links: span.links.map((link) => ({
      traceId: link.span.traceId,
      spanId: link.span.spanId,
      attributes: Object.entries(link.attributes)
    })),
    status: outcome.status
  }
}

/** A short, bounded label for a failed export: the HTTP status, the network error's code, `timeout`, or `_OTHER`. */
const errorTypeOf = (error: unknown): string => {
  if (error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")) return "timeout"
  const code = (error as { code?: unknown } | undefined)?.code
  if (typeof code === "string" && /^[A-Za-z_]{1,40}$/.test(code)) return code
  return "_OTHER"
}

/** Posts one batch; answers undefined when the receiving end took it, else why not. */
const makeSender = (exporter: OtlpExporter, resource: string) => (batch: Array<string>): Promise<ExportOutcome> => {
  const json = exportRequest(resource, "petstore", batch)
  return fetch(exporter.url, {
    method: "POST",
    headers: {
      ...exporter.headers,
      "content-type": "application/json",
      ...(exporter.gzip ? { "content-encoding": "gzip" } : {})
    },
    body: exporter.gzip ? Bun.gzipSync(json) : json,
    signal: AbortSignal.timeout(exporter.timeoutMillis)
  }).then(
    async (response) => {
      // Read to its end, so the connection is kept for the next export.
      await response.arrayBuffer().catch(() => undefined)
      return response.ok ? undefined : String(response.status)
    },
    errorTypeOf
  )
}

/**
 * The tracer exporting sampled traces in batches over OTLP/HTTP (JSON) to the endpoint of the
 * standard `OTEL_EXPORTER_OTLP_*` variables, with their headers, timeout and compression; the
 * queue's bounds come from `OTEL_BSP_*`. Spans still queued are sent when the layer is released.
 */
const exportingTracer = (tracing: Tracing) =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const resource = keyValues(Object.entries({
      ...tracing.resourceAttributes,
      "service.name": tracing.serviceName,
      "telemetry.sdk.name": "petstore",
      "telemetry.sdk.language": "nodejs"
    }))
    const queue = makeSpanQueue<string>(tracing.batch, makeSender(tracing.exporter, resource))
    yield* addCollector(queue.series)
    yield* Effect.addFinalizer(() =>
      Effect.promise(queue.flush).pipe(
        Effect.timeoutOption("3 seconds"),
        // A finalizer runs uninterruptibly: without this the timeout could not cut a hung export short.
        Effect.interruptible
      )
    )
    return Layer.setTracer(
      makeTracer((span) => queue.offer(() => spanJson(exportedSpan(span))))
    )
  }))

/**
 * Effect's tracer exporting over OTLP when an endpoint is configured. Otherwise the tracer is
 * switched off, so the spans that libraries open (`@effect/sql` opens one per statement) cost
 * nothing either.
 */
export const TracingLive = Layer.unwrapEffect(
  Effect.map(ObservabilityConfig, ({ tracing }) =>
    Option.match(tracing, {
      onNone: () => Layer.setTracerEnabled(false),
      onSome: exportingTracer
    })
  )
)
