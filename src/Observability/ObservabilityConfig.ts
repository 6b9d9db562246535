import { Config, Context, Layer, Option, Schema, SchemaTransformation } from "effect"

// OpenTelemetry's samplers: each root sampler, and its `parentbased_` form that follows a sampled parent.
const rootSamplers = ["always_on", "always_off", "traceidratio"] as const
const samplerNames = [...rootSamplers, ...rootSamplers.map((name) => `parentbased_${name}` as const)]

export type SamplerName = typeof samplerNames[number]

const checked = <T>(name: string, codec: Schema.Codec<T, string>, message: string, valid: (value: T) => boolean) =>
  Config.schema(codec.check(Schema.makeFilter((value: T) => valid(value) || message)), name)

const isHttpUrl = (value: string) => URL.canParse(value) && ["http:", "https:"].includes(new URL(value).protocol)

const positiveInteger = (name: string) =>
  checked(name, Schema.NumberFromString, "must be a whole number above 0", (n) => Number.isInteger(n) && n > 0)

const otlpUrl = (name: string) =>
  Config.option(checked(name, Schema.String, "must be an absolute http(s) URL of an OTLP/HTTP receiver", isHttpUrl))

/** A `key=value,…` list, values percent-encoded, split and decoded as `effect/observability` reads one. */
const keyValueList = Schema.String.pipe(Schema.decodeTo(
  Schema.Record(Schema.String, Schema.StringFromUriComponent),
  SchemaTransformation.splitKeyValue({ trim: true, keepEmptyValues: true })
))

/** Every item `key=value` with a key (the library skips one that is not), every value decoding. */
const isKeyValueList = (list: string) =>
  list.trim() === "" ||
  (list.split(",").every((item) => /^[^=]+=/.test(item.trim())) &&
    Option.isSome(Schema.decodeOption(keyValueList)(list)))

const keyValues = (name: string) =>
  checked(name, Schema.String, "must be comma-separated key=value pairs, values percent-encoded", isKeyValueList).pipe(
    Config.map(Schema.decodeSync(keyValueList)),
    Config.withDefault({} as Record<string, string>)
  )

const compression = (name: string) => Config.Literals(["gzip", "none"], name)

const isRatio = (n: number) => n >= 0 && n <= 1
const isOff = (value: string) => value.trim().toLowerCase() === "off"
const isPortOrOff = (value: string) => isOff(value) || (/^\s*\d+\s*$/.test(value) && +value >= 1 && +value <= 65535)

const metricsPort = checked("METRICS_PORT", Schema.String, "must be off or a port number from 1 to 65535", isPortOrOff)
  .pipe(Config.map((value) => isOff(value) ? undefined : Number(value)), Config.withDefault(9464))

/** The Prometheus listener's address and port (`METRICS_HOST`, `METRICS_PORT`); none with `METRICS_PORT=off`. */
export const metricsListener = Config.all({
  port: metricsPort,
  host: Config.String("METRICS_HOST").pipe(Config.withDefault("127.0.0.1"))
}).pipe(Config.map(({ host, port }) => port === undefined ? Option.none() : Option.some({ host, port })))

const config = Config.all({
  metrics: metricsListener,
  endpoint: otlpUrl("OTEL_EXPORTER_OTLP_ENDPOINT"),
  tracesEndpoint: otlpUrl("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
  disabled: Config.Boolean("OTEL_SDK_DISABLED").pipe(Config.withDefault(false)),
  exporter: Config.Literals(["otlp", "none"], "OTEL_TRACES_EXPORTER").pipe(Config.withDefault("otlp" as const)),
  serviceName: Config.option(Config.String("OTEL_SERVICE_NAME")),
  resourceAttributes: keyValues("OTEL_RESOURCE_ATTRIBUTES"),
  sampler: Config.Literals(samplerNames, "OTEL_TRACES_SAMPLER").pipe(
    Config.withDefault("parentbased_always_on" as const)
  ),
  ratio: checked("OTEL_TRACES_SAMPLER_ARG", Schema.NumberFromString, "must be a number from 0 to 1", isRatio).pipe(
    Config.withDefault(1)
  ),
  // Spans held at most (beyond it dropped), a full batch's size (as OpenTelemetry's SDK has it, never above the
  // queue's), an ended span's longest wait.
  batch: Config.all({
    maxQueueSize: positiveInteger("OTEL_BSP_MAX_QUEUE_SIZE").pipe(Config.withDefault(2048)),
    maxExportBatchSize: positiveInteger("OTEL_BSP_MAX_EXPORT_BATCH_SIZE").pipe(Config.withDefault(512)),
    scheduleDelayMillis: positiveInteger("OTEL_BSP_SCHEDULE_DELAY").pipe(Config.withDefault(5000))
  }).pipe(
    Config.map((batch) => ({ ...batch, maxExportBatchSize: Math.min(batch.maxExportBatchSize, batch.maxQueueSize) }))
  ),
  headers: keyValues("OTEL_EXPORTER_OTLP_HEADERS"),
  tracesHeaders: keyValues("OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
  timeout: positiveInteger("OTEL_EXPORTER_OTLP_TIMEOUT").pipe(Config.withDefault(10000)),
  tracesTimeout: Config.option(positiveInteger("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")),
  compression: compression("OTEL_EXPORTER_OTLP_COMPRESSION").pipe(Config.withDefault("none" as const)),
  tracesCompression: Config.option(compression("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"))
}).pipe(
  Config.map((c) => ({
    metrics: c.metrics,
    tracing: (Option.isNone(c.endpoint) && Option.isNone(c.tracesEndpoint)) || c.disabled || c.exporter === "none"
      ? Option.none()
      : Option.some({
        defaultServiceName: Option.isNone(c.serviceName) && c.resourceAttributes["service.name"] === undefined
          ? "petstore"
          : undefined,
        sampler: c.sampler,
        ratio: c.ratio,
        batch: c.batch,
        // OTLP/HTTP with JSON bodies; the headers are often a credential, never logged.
        exporter: {
          url: Option.getOrElse(c.tracesEndpoint, () => Option.getOrThrow(c.endpoint).replace(/\/?$/, "/v1/traces")),
          headers: { ...c.headers, ...c.tracesHeaders },
          timeoutMillis: Option.getOrElse(c.tracesTimeout, () => c.timeout),
          gzip: Option.getOrElse(c.tracesCompression, () => c.compression) === "gzip"
        }
      })
  }))
)

/** Traces exported: the `OTEL_*` variables read as the export uses them. */
export type Tracing = Option.Option.Value<Config.Success<typeof config>["tracing"]>

/**
 * From the OpenTelemetry variables. Not `OtlpTracer.layerFromConfig`: it takes `OTEL_EXPORTER_OTLP_TIMEOUT` as a stop's
 * wait, not an attempt's bound, dies on a value without naming its variable, and reads neither sampler nor queue size.
 */
export class ObservabilityConfig
  extends Context.Service<ObservabilityConfig, Config.Success<typeof config>>()("petstore/ObservabilityConfig")
{
  static readonly config = config

  static readonly layer = Layer.effect(ObservabilityConfig, config)

  /** Neither metrics nor traces, unless given: for tests and for composing the service in code. */
  static readonly make = (options: Partial<ObservabilityConfig["Service"]> = {}) =>
    Layer.succeed(ObservabilityConfig)({ metrics: Option.none(), tracing: Option.none(), ...options })
}
