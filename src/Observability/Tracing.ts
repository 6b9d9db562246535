import { Cause, Context, Duration, Effect, Exit, Layer, Option, References, Scope, type Tracer } from "effect"
import { FetchHttpClient, type HttpBody, HttpClient, HttpClientError, HttpClientRequest } from "effect/http"
import { OtlpExporter, OtlpSerialization, OtlpTracer } from "effect/observability"
import { readAtScrape } from "./Metrics.js"
import { ObservabilityConfig, type Tracing } from "./ObservabilityConfig.js"
import { SpanRecorder } from "./RequestTrace.js"

/**
 * A sampled trace's span while the export can hold no more: one shared value, already ended,
 * counted and never made; a span started under it is it again.
 */
const dropped: Tracer.Span = {
  _tag: "Span",
  name: "dropped",
  // The W3C invalid ids: a call made under it would start no trace elsewhere.
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

const minBackoffMillis = 1000
const maxBackoffMillis = 30_000
/** An exporter taking batches starts one as soon as a batch's spans wait: one waiting longer is discarding them. */
const discardingAfterMillis = 1000

/**
 * Bounds what the export holds, which effect/observability's exporter does not: it starts an
 * export per full batch and retries each, so while a collector is away or hung every span waits in
 * memory until the exporter gives up (in process, 2,000 requests/s of five spans for 10 s:
 * resident memory grew 55 MiB with a collector refusing and 140 MiB with one hung, and not at all
 * with this bound). A sampled trace's span is recorded only while fewer than
 * `OTEL_BSP_MAX_QUEUE_SIZE` are held (recorded and not yet in a batch, or in a batch until its
 * first answer), and not for 1 s doubling to 30 s after a failed export; others are dropped and
 * counted. The exporter takes its whole buffer at each batch and starts one as soon
 * as `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` spans wait, so a full batch left waiting means it is
 * discarding them (its pause after a failure): they count as dropped, and new ones are held back
 * as after a failed export.
 */
const makeExportGuard = (batch: Tracing["batch"]) => {
  let held = 0
  let waiting = 0
  let batchWaitingSince = 0
  let pausedUntil = 0
  let backoffMillis = 0
  let handed = 0
  let droppedSpans = 0
  let exported = 0
  const failed = new Map<string, number>()
  // A batch's span count from its serialization to its export's first answer: the body is all the
  // library hands both. One entry per batch in flight, removed at its first answer; one whose
  // export is interrupted goes with the guard, when the tracer's layer is released.
  const spansIn = new Map<HttpBody.HttpBody, number>()

  const pause = () => {
    backoffMillis = Math.min(maxBackoffMillis, Math.max(minBackoffMillis, backoffMillis * 2))
    pausedUntil = Date.now() + backoffMillis
  }

  const refuse = () => {
    droppedSpans++
    return false
  }

  return {
    /** Whether a sampled trace's new span may be recorded now; counted as dropped if not. */
    admit: (): boolean => {
      if (pausedUntil !== 0) {
        if (Date.now() < pausedUntil) return refuse()
        pausedUntil = 0
      }
      if (waiting >= batch.maxExportBatchSize) {
        const now = Date.now()
        if (batchWaitingSince === 0) batchWaitingSince = now
        else if (now - batchWaitingSince > discardingAfterMillis) {
          droppedSpans += waiting
          held -= waiting
          waiting = 0
          batchWaitingSince = 0
          pause()
          return refuse()
        }
      }
      if (held >= batch.maxQueueSize) return refuse()
      held++
      return true
    },
    drop: (): void => void droppedSpans++,
    ended: (): void => void waiting++,
    /** A batch serialized: the exporter took every span waiting; any not in it, it had discarded. */
    handed: (body: HttpBody.HttpBody, spans: number): void => {
      spansIn.set(body, spans)
      if (waiting > spans) {
        droppedSpans += waiting - spans
        held = Math.max(0, held - (waiting - spans))
      }
      waiting = 0
      batchWaitingSince = 0
      handed += spans
    },
    /** The first answer to a batch: taken (`errorType` undefined), or why not. */
    answered: (body: HttpBody.HttpBody, errorType: string | undefined): void => {
      const spans = spansIn.get(body)
      if (spans === undefined) return
      spansIn.delete(body)
      held = Math.max(0, held - spans)
      if (errorType === undefined) {
        exported += spans
        backoffMillis = 0
        pausedUntil = 0
      } else {
        failed.set(errorType, (failed.get(errorType) ?? 0) + spans)
        pause()
      }
    },
    held: () => held,
    capacity: () => batch.maxQueueSize,
    handedCount: () => handed,
    droppedCount: () => droppedSpans,
    exportedCount: () => exported,
    failedCount: (errorType: string) => failed.get(errorType) ?? 0
  }
}

type ExportGuard = ReturnType<typeof makeExportGuard>

/**
 * The OTLP tracer's spans for the request traces the edge sampled (`RequestTrace.ts`), each made
 * only while the export can hold it: one beyond it, or below one dropped, is dropped and counted.
 */
const recorderOf = (tracer: Tracer.Tracer, guard: ExportGuard): SpanRecorder => ({
  start: (name, kind, parent, startTime) => {
    if (parent === dropped) {
      guard.drop()
      return dropped
    }
    if (!guard.admit()) return dropped
    return tracer.span({
      name,
      kind,
      startTime,
      parent: parent === undefined ? Option.none() : Option.some(parent),
      root: parent === undefined,
      sampled: true,
      annotations: Context.empty(),
      links: []
    })
  },
  end: (span, endTime, exit) => {
    if (span === dropped) return
    span.end(endTime, exit)
    guard.ended()
  }
})

/** A short, bounded label for a failed export: the HTTP status, the network error's code, `timeout`, or `_OTHER`. */
const errorTypeOf = (error: unknown): string => {
  const cause = HttpClientError.isHttpClientError(error) && error.reason._tag === "TransportError" ? error.reason.cause : error
  if (Cause.isTimeoutError(cause)) return "timeout"
  const code = (cause as { code?: unknown } | undefined)?.code
  return typeof code === "string" && /^[A-Za-z_]{1,40}$/.test(code) ? code : "_OTHER"
}

type OtlpSpan = OtlpTracer.TraceData["resourceSpans"][number]["scopeSpans"][number]["spans"][number]

const serverKind = 2

/**
 * A request's server span is made before the router matches its route, named by its method: it
 * is named by its method and route (`GET /v1/pets/{petId}`) once the request set `http.route`.
 */
const named = (span: OtlpSpan): OtlpSpan => {
  if (span.kind !== serverKind) return span
  const route = span.attributes.find((attribute) => attribute.key === "http.route")?.value.stringValue
  return typeof route === "string" ? { ...span, name: `${span.name} ${route}` } : span
}

/** The JSON serialization, with server spans named, noting each batch of spans handed to an export. */
const exportSerialization = (guard: ExportGuard) =>
  Layer.effect(
    OtlpSerialization.OtlpSerialization,
    Effect.map(OtlpSerialization.OtlpSerialization, (json) =>
      OtlpSerialization.OtlpSerialization.of({
        ...json,
        traces: (data) => {
          let spans = 0
          const body = json.traces({
            resourceSpans: data.resourceSpans.map((resource) => ({
              ...resource,
              scopeSpans: resource.scopeSpans.map((scope) => {
                spans += scope.spans.length
                return { ...scope, spans: scope.spans.map(named) }
              })
            }))
          })
          guard.handed(body, spans)
          return body
        }
      }))
  ).pipe(Layer.provide(OtlpSerialization.layerJson))

/**
 * The HTTP client the exporter posts with: fetch, each attempt bounded by the OTLP timeout (a
 * collector that takes a connection and never answers must not hold a batch forever), gzip when
 * configured, and every answer noted.
 */
const exportClient = (tracing: Tracing, guard: ExportGuard, noteFailure: (errorType: string) => Effect.Effect<void>) =>
  Layer.effect(
    HttpClient.HttpClient,
    Effect.map(HttpClient.HttpClient, (fetchClient) =>
      HttpClient.transform(
        tracing.exporter.gzip ? HttpClient.mapRequestEffect(fetchClient, HttpClientRequest.compressBody("gzip")) : fetchClient,
        (response, request) =>
          response.pipe(
            Effect.timeoutOrElse({
              duration: Duration.millis(tracing.exporter.timeoutMillis),
              orElse: () =>
                Effect.fail(
                  new HttpClientError.HttpClientError({
                    reason: new HttpClientError.TransportError({ request, cause: new Cause.TimeoutError(), description: "timed out" })
                  })
                )
            }),
            Effect.onExit((exit) => {
              // Interrupted: the layer is going, and the batch with it.
              if (Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)) return Effect.void
              const errorType = Exit.isFailure(exit)
                ? errorTypeOf(Cause.squash(exit.cause))
                : exit.value.status >= 200 && exit.value.status < 300
                ? undefined
                : String(exit.value.status)
              guard.answered(request.body, errorType)
              return errorType === undefined ? Effect.void : noteFailure(errorType)
            })
          )
      ))
  ).pipe(Layer.provide(FetchHttpClient.layer))

const processor = { otel_component_type: "batching_span_processor" }
const exporter = { otel_component_type: "otlp_http_json_span_exporter" }
const processedHelp =
  "Ended spans handed to the exporter, or dropped because the export could hold no more (error_type=\"queue_full\")"
const exportedHelp = "Spans sent to the OTLP receiving end: taken, or not taken at their batch's first attempt (error_type)"

/**
 * The guard's counts under OpenTelemetry's SDK metric names (the library counts nothing), read at
 * each scrape while the tracer lasts. Answers how to add the series of an error type, once seen.
 */
const exportSeries = (guard: ExportGuard) =>
  Effect.gen(function*() {
    const counter = (name: string, help: string, attributes: Record<string, string>, read: () => number) =>
      readAtScrape("counter", name, help, attributes, read)
    yield* readAtScrape(
      "gauge",
      "otel_sdk_processor_span_queue_size",
      "Ended spans held for export: waiting for their batch, or in one being sent",
      processor,
      guard.held
    )
    yield* readAtScrape(
      "gauge",
      "otel_sdk_processor_span_queue_capacity",
      "Spans held for export at most (OTEL_BSP_MAX_QUEUE_SIZE); beyond it they are dropped",
      processor,
      guard.capacity
    )
    yield* counter("otel_sdk_processor_span_processed_total", processedHelp, processor, guard.handedCount)
    yield* counter("otel_sdk_processor_span_processed_total", processedHelp, { ...processor, error_type: "queue_full" }, guard.droppedCount)
    yield* counter("otel_sdk_exporter_span_exported_total", exportedHelp, exporter, guard.exportedCount)
    const scope = yield* Scope.Scope
    const seen = new Set<string>()
    return (errorType: string): Effect.Effect<void> => {
      if (seen.has(errorType)) return Effect.void
      seen.add(errorType)
      return counter("otel_sdk_exporter_span_exported_total", exportedHelp, { ...exporter, error_type: errorType }, () =>
        guard.failedCount(errorType)).pipe(Effect.provideService(Scope.Scope, scope))
    }
  })

/**
 * Effect's OTLP tracer exporting sampled traces over OTLP/HTTP (JSON) to the endpoint of the
 * standard `OTEL_EXPORTER_OTLP_*` variables, with their headers, timeout and compression, in
 * batches of `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` at least every `OTEL_BSP_SCHEDULE_DELAY`. Spans
 * still waiting are sent when the layer is released, for 3 s at most.
 */
const exportingRecorder = (tracing: Tracing) => {
  const guard = makeExportGuard(tracing.batch)
  return Layer.unwrap(Effect.map(exportSeries(guard), (noteFailure) =>
    Layer.effect(
      SpanRecorder,
      Effect.map(
        OtlpTracer.make({
          url: tracing.exporter.url,
          // Read by the library from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
          resource: tracing.defaultServiceName === undefined ? undefined : { serviceName: tracing.defaultServiceName },
          headers: tracing.exporter.headers,
          exportInterval: Duration.millis(tracing.batch.scheduleDelayMillis),
          maxBatchSize: tracing.batch.maxExportBatchSize,
          shutdownTimeout: Duration.seconds(3)
        }),
        (otlp) => recorderOf(otlp, guard)
      )
    ).pipe(Layer.provide([OtlpExporter.layerFlusher, exportSerialization(guard), exportClient(tracing, guard, noteFailure)]))))
}

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
