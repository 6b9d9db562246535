import { Config, Context, Layer, Option, Schema } from "effect"

const samplerNames = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio"
] as const

/** The samplers `OTEL_TRACES_SAMPLER` names. */
export type SamplerName = typeof samplerNames[number]

export interface Tracing {
  /**
   * The service name the resource takes when the operator names none (`OTEL_SERVICE_NAME`, or
   * `service.name` in `OTEL_RESOURCE_ATTRIBUTES`, which `OtlpResource.fromConfig` reads).
   */
  readonly defaultServiceName: string | undefined
  readonly sampler: SamplerName
  /** The sampled share of traces, for the ratio samplers. */
  readonly ratio: number
  /** How spans are batched, from `OTEL_BSP_*`. */
  readonly batch: {
    /** Spans held for export at most (waiting for their batch, or in one being sent); beyond it they are dropped. */
    readonly maxQueueSize: number
    /** How long an ended span may wait for its batch. */
    readonly scheduleDelayMillis: number
    /** A batch is sent as soon as it holds this many spans. */
    readonly maxExportBatchSize: number
  }
  readonly exporter: OtlpExporter
}

/** Where and how spans are sent: OTLP/HTTP with JSON bodies. */
export interface OtlpExporter {
  /** `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, or `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/traces`. */
  readonly url: string
  /** `OTEL_EXPORTER_OTLP_HEADERS`, then `OTEL_EXPORTER_OTLP_TRACES_HEADERS`: often a credential, never logged. */
  readonly headers: Readonly<Record<string, string>>
  /** How long one attempt to send a batch may take. */
  readonly timeoutMillis: number
  readonly gzip: boolean
}

/** A variable read with `codec` and accepted by `valid`, else refused with `message` naming what it must be. */
const checked = <T>(codec: Schema.Codec<T, string>, name: string, message: string, valid: (value: T) => boolean) =>
  Config.schema(codec.check(Schema.makeFilter((value: T) => valid(value) || message)), name)

const positiveInteger = (name: string) => checked(Schema.NumberFromString, name, "must be a whole number above 0", (n) => Number.isInteger(n) && n > 0)

const otlpUrl = (name: string) =>
  checked(Schema.String, name, "must be an absolute http(s) URL of an OTLP/HTTP receiver", (value) => {
    try {
      return ["http:", "https:"].includes(new URL(value).protocol)
    } catch {
      return false
    }
  })

/** Whether a percent-encoded value decodes (`OtlpResource.fromConfig` refuses the list at start otherwise). */
const decodes = (value: string) => {
  try {
    decodeURIComponent(value)
    return true
  } catch {
    return false
  }
}

/** The W3C Baggage-like list of the specification: values may be percent-encoded. */
const parseAttributes = (list: string): Record<string, string> =>
  Object.fromEntries(list.split(",").filter((pair) => pair.trim() !== "").map((pair) => {
    const at = pair.indexOf("=")
    return [pair.slice(0, at).trim(), decodeURIComponent(pair.slice(at + 1).trim())]
  }))

/** A W3C Baggage-like list, `key=value,key=value`, as the OpenTelemetry variables take it. */
const keyValueList = (name: string) =>
  checked(
    Schema.String,
    name,
    "must be comma-separated key=value pairs, values percent-encoded",
    (list) =>
      list.trim() === "" ||
      list.split(",").every((pair) => /^[^=]+=.*$/.test(pair.trim()) && decodes(pair.slice(pair.indexOf("=") + 1).trim()))
  ).pipe(Config.map(parseAttributes), Config.withDefault({} as Record<string, string>))

const compression = (name: string) => Config.Literals(["gzip", "none"], name)

const config = Config.all({
  metricsPort: checked(
    Schema.String,
    "METRICS_PORT",
    "must be off or a port number from 1 to 65535",
    (value) =>
      value.trim().toLowerCase() === "off" || (/^\d+$/.test(value.trim()) && Number(value) >= 1 && Number(value) <= 65535)
  ).pipe(
    // 0 stands for off.
    Config.map((value) => value.trim().toLowerCase() === "off" ? 0 : Number(value)),
    Config.withDefault(9464)
  ),
  metricsHost: Config.String("METRICS_HOST").pipe(Config.withDefault("127.0.0.1")),
  endpoint: Config.option(otlpUrl("OTEL_EXPORTER_OTLP_ENDPOINT")),
  tracesEndpoint: Config.option(otlpUrl("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")),
  disabled: Config.Boolean("OTEL_SDK_DISABLED").pipe(Config.withDefault(false)),
  exporter: Config.Literals(["otlp", "none"], "OTEL_TRACES_EXPORTER").pipe(Config.withDefault("otlp" as const)),
  serviceName: Config.option(Config.String("OTEL_SERVICE_NAME")),
  resourceAttributes: keyValueList("OTEL_RESOURCE_ATTRIBUTES"),
  sampler: Config.Literals(samplerNames, "OTEL_TRACES_SAMPLER").pipe(Config.withDefault("parentbased_always_on" as const)),
  ratio: checked(Schema.NumberFromString, "OTEL_TRACES_SAMPLER_ARG", "must be a number from 0 to 1", (n) => n >= 0 && n <= 1)
    .pipe(Config.withDefault(1)),
  maxQueueSize: positiveInteger("OTEL_BSP_MAX_QUEUE_SIZE").pipe(Config.withDefault(2048)),
  maxExportBatchSize: positiveInteger("OTEL_BSP_MAX_EXPORT_BATCH_SIZE").pipe(Config.withDefault(512)),
  scheduleDelayMillis: positiveInteger("OTEL_BSP_SCHEDULE_DELAY").pipe(Config.withDefault(5000)),
  headers: keyValueList("OTEL_EXPORTER_OTLP_HEADERS"),
  tracesHeaders: keyValueList("OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
  timeout: positiveInteger("OTEL_EXPORTER_OTLP_TIMEOUT").pipe(Config.withDefault(10000)),
  tracesTimeout: Config.option(positiveInteger("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")),
  compression: compression("OTEL_EXPORTER_OTLP_COMPRESSION").pipe(Config.withDefault("none" as const)),
  tracesCompression: Config.option(compression("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"))
}).pipe(
  Config.map((c) => ({
    metrics: c.metricsPort === 0 ? Option.none() : Option.some({ host: c.metricsHost, port: c.metricsPort }),
    tracing: (Option.isNone(c.endpoint) && Option.isNone(c.tracesEndpoint)) || c.disabled || c.exporter === "none"
      ? Option.none<Tracing>()
      : Option.some<Tracing>({
        defaultServiceName: Option.isNone(c.serviceName) && c.resourceAttributes["service.name"] === undefined
          ? "petstore"
          : undefined,
        sampler: c.sampler,
        ratio: c.ratio,
        batch: {
          maxQueueSize: c.maxQueueSize,
          // As OpenTelemetry's SDK does, a batch is never larger than the queue.
          maxExportBatchSize: Math.min(c.maxExportBatchSize, c.maxQueueSize),
          scheduleDelayMillis: c.scheduleDelayMillis
        },
        exporter: {
          url: Option.getOrElse(c.tracesEndpoint, () => Option.getOrThrow(c.endpoint).replace(/\/?$/, "/v1/traces")),
          headers: { ...c.headers, ...c.tracesHeaders },
          timeoutMillis: Option.getOrElse(c.tracesTimeout, () => c.timeout),
          gzip: Option.getOrElse(c.tracesCompression, () => c.compression) === "gzip"
        }
      })
  }))
)

/**
 * Where metrics are served and whether traces are exported, from the standard OpenTelemetry
 * variables: spans are exported only when an OTLP endpoint is set. Read here rather than by
 * `OtlpTracer.layerFromConfig` (whose exporter the service does not use: `Tracing.ts`), which reads the endpoint, headers, compression and batching the
 * same way but takes `OTEL_EXPORTER_OTLP_TIMEOUT` as how long a stop waits for the last export,
 * where the specification and the service mean each attempt's bound (a stop waits 3 s at most
 * and each attempt times out: `Sampling.test.ts`, "beyond the queue…"; `Tracing.test.ts`, "a
 * collector that takes exports and never answers"), dies on a value it cannot read where the
 * service names the variable, and reads neither the sampler nor the queue's size. The resource
 * (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`) is the library's to read (`Tracing.ts`).
 */
export class ObservabilityConfig extends Context.Service<ObservabilityConfig, {
  /** The Prometheus listener; none with `METRICS_PORT=off`. */
  readonly metrics: Option.Option<{ readonly host: string; readonly port: number }>
  readonly tracing: Option.Option<Tracing>
}>()("petstore/ObservabilityConfig") {
  static readonly config = config

  static readonly layer = Layer.effect(ObservabilityConfig, config)

  /** Neither metrics nor traces, unless given: for tests and for composing the service in code. */
  static readonly make = (options: Partial<ObservabilityConfig["Service"]> = {}) =>
    Layer.succeed(ObservabilityConfig)({ metrics: Option.none(), tracing: Option.none(), ...options })
}
