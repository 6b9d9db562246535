import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { resourceFromAttributes } from "@opentelemetry/resources"
import { Cause, Context, Effect, Exit, Layer, Option, Tracer } from "effect"
import { addCollector } from "./Exposition.js"
import { ObservabilityConfig, type Tracing } from "./ObservabilityConfig.js"
import { makeSampler, type Sampler } from "./Sampler.js"
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

/** A span of a trace not sampled: its ids for whoever asks, nothing recorded. */
class UnsampledSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly sampled = false
  readonly spanId = randomHex(2)
  readonly attributes = new Map<string, unknown>()
  readonly links = []
  status: Tracer.SpanStatus

  constructor(
    readonly name: string,
    readonly traceId: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Context.Context<never>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind
  ) {
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
 * Effect's tracer for this service: a trace entering the process (a span without a parent, or
 * with a caller's) is sampled there, once; every span below follows its parent. A span of a
 * sampled trace is recorded and queued for export when it ends; of any other, nothing is kept.
 * Unlike `@effect/opentelemetry`'s tracer it wraps no fiber step in an OpenTelemetry context:
 * nothing in the service reads one, and that wrap cost every request that ran under a span.
 */
export const makeTracer = (sample: Sampler, ended: (span: RecordedSpan) => void): Tracer.Tracer =>
  Tracer.make({
    span(name, parent, context, links, startTime, kind) {
      const from = Option.getOrUndefined(parent)
      const sampled = from === undefined || from._tag === "ExternalSpan" ? sample(from) : from.sampled
      const traceId = from?.traceId ?? randomHex(4)
      if (!sampled) return new UnsampledSpan(name, traceId, parent, context, startTime, kind)
      const traceState = from === undefined
        ? undefined
        : from._tag === "ExternalSpan"
        ? Context.getOption(from.context, CallerTraceState).pipe(Option.getOrUndefined)
        : from instanceof RecordedSpan
        ? from.traceState
        : undefined
      return new RecordedSpan(name, traceId, parent, traceState, context, links.slice(), startTime, kind, ended)
    },
    context: (execution) => execution()
  })

const spanKinds: Record<Tracer.SpanKind, number> = { internal: 0, server: 1, client: 2, producer: 3, consumer: 4 }

const hrTime = (nanos: bigint): [number, number] => [Number(nanos / 1_000_000_000n), Number(nanos % 1_000_000_000n)]

const attributeValue = (value: unknown): string | number | boolean | Array<string | number | boolean> => {
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") return value
  if (typeof value === "bigint") return value.toString()
  if (Array.isArray(value) && value.every((item) => ["string", "number", "boolean"].includes(typeof item))) return value
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

const attributesOf = (entries: Iterable<readonly [string, unknown]>) => {
  const attributes: Record<string, ReturnType<typeof attributeValue>> = {}
  for (const [key, value] of entries) attributes[key] = attributeValue(value)
  return attributes
}

/** OpenTelemetry's span status and exception event for how the span's effect ended. */
const outcomeOf = (exit: Exit.Exit<unknown, unknown>, endTime: [number, number]) => {
  if (Exit.isSuccess(exit)) return { status: { code: 1 }, events: [], attributes: {} }
  if (Cause.isInterruptedOnly(exit.cause)) return { status: { code: 1 }, events: [], attributes: { "status.interrupted": true } }
  const error = Cause.squash(exit.cause)
  const message = error instanceof Error ? error.message : String(error)
  const type = error instanceof Error ? ((error as { _tag?: string })._tag ?? error.name) : typeof error
  return {
    status: { code: 2, message },
    events: [{
      name: "exception",
      time: endTime,
      attributes: {
        "exception.type": type,
        "exception.message": message,
        // A defect's trace says where; a failure the API expects (401, 404) has nothing to add.
        ...(Cause.isDie(exit.cause) ? { "exception.stacktrace": Cause.pretty(exit.cause) } : {})
      }
    }],
    attributes: {}
  }
}

/** A recorded span as the OTLP exporter reads one. */
const toReadableSpan = (span: RecordedSpan, resource: unknown, scope: { readonly name: string }) => {
  if (span.status._tag !== "Ended") throw new Error("only an ended span is exported")
  const { endTime, exit, startTime } = span.status
  const end = hrTime(endTime)
  const parent = Option.getOrUndefined(span.parent)
  const traceState = span.traceState === undefined ? undefined : verbatimTraceState(span.traceState)
  const outcome = outcomeOf(exit, end)
  return {
    name: span.name,
    kind: spanKinds[span.kind],
    spanContext: () => ({ traceId: span.traceId, spanId: span.spanId, traceFlags: 1, traceState }),
    parentSpanContext: parent === undefined ? undefined : {
      traceId: parent.traceId,
      spanId: parent.spanId,
      traceFlags: parent.sampled ? 1 : 0,
      isRemote: parent._tag === "ExternalSpan"
    },
    startTime: hrTime(startTime),
    endTime: end,
    duration: hrTime(endTime - startTime),
    status: outcome.status,
    attributes: { ...attributesOf(span.attributes), ...outcome.attributes },
    links: span.links.map((link) => ({
      context: { traceId: link.span.traceId, spanId: link.span.spanId, traceFlags: link.span.sampled ? 1 : 0 },
      attributes: attributesOf(Object.entries(link.attributes))
    })),
    events: [
      ...span.events.map(([name, time, attributes]) => ({
        name,
        time: hrTime(time),
        attributes: attributes === undefined ? undefined : attributesOf(Object.entries(attributes))
      })),
      ...outcome.events
    ],
    ended: true,
    resource,
    instrumentationScope: scope,
    droppedAttributesCount: 0,
    droppedEventsCount: span.droppedEvents,
    droppedLinksCount: 0
  }
}

/** The caller's `tracestate`, exported exactly as it came rather than parsed and written again. */
const verbatimTraceState = (value: string) => ({
  serialize: () => value,
  get: () => undefined,
  set() {
    return this
  },
  unset() {
    return this
  }
})

/** A short, bounded label for a failed export: the HTTP status, the network error's code, or `_OTHER`. */
const errorTypeOf = (error: unknown): string => {
  const code = (error as { code?: unknown } | undefined)?.code
  if (typeof code === "number") return String(code)
  if (typeof code === "string" && /^[A-Z_]{1,32}$/.test(code)) return code
  if (error instanceof Error && /timed? ?out/i.test(error.message)) return "timeout"
  return "_OTHER"
}

/**
 * The tracer exporting sampled traces in batches over OTLP/HTTP (JSON): the exporter reads its
 * endpoint, headers and timeout from the standard `OTEL_EXPORTER_OTLP_*` variables; the queue's
 * bounds come from `OTEL_BSP_*`. Spans still queued are sent when the layer is released.
 */
const exportingTracer = (tracing: Tracing) =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const resource = resourceFromAttributes({
      ...tracing.resourceAttributes,
      "service.name": tracing.serviceName,
      "telemetry.sdk.name": "petstore",
      "telemetry.sdk.language": "nodejs"
    })
    const scope = { name: "petstore" }
    const exporter = new OTLPTraceExporter()
    const send = (batch: Array<RecordedSpan>) =>
      new Promise<ExportOutcome>((resolve) =>
        exporter.export(
          batch.map((span) => toReadableSpan(span, resource, scope)) as never,
          (result) => resolve(result.code === 0 ? undefined : errorTypeOf(result.error))
        )
      )
    const queue = makeSpanQueue(tracing.batch, send)
    yield* Effect.acquireRelease(Effect.sync(() => addCollector(queue.series)), (remove) => Effect.sync(remove))
    yield* Effect.addFinalizer(() =>
      Effect.promise(() => queue.flush().then(() => exporter.shutdown())).pipe(
        Effect.timeoutOption("3 seconds"),
        // A finalizer runs uninterruptibly: without this the timeout could not cut a hung export short.
        Effect.interruptible
      )
    )
    return Layer.setTracer(makeTracer(makeSampler(tracing.sampler, tracing.ratio), queue.add))
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
