import { Config, Context, Layer, Option } from "effect"
import type { BatchSettings } from "./SpanQueue.js"

export type SamplerName =
  | "always_on"
  | "always_off"
  | "traceidratio"
  | "parentbased_always_on"
  | "parentbased_always_off"
  | "parentbased_traceidratio"

const samplerNames: ReadonlyArray<SamplerName> = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio"
]

export interface Tracing {
  readonly serviceName: string
  /** From `OTEL_RESOURCE_ATTRIBUTES`: `key=value` pairs, comma-separated. */
  readonly resourceAttributes: Readonly<Record<string, string>>
  readonly sampler: SamplerName
  /** The sampled share of traces, for the ratio samplers. */
  readonly ratio: number
  /** The export queue's bounds, from `OTEL_BSP_*`. */
  readonly batch: BatchSettings
  readonly exporter: OtlpExporter
}

/** Where and how spans are sent: OTLP/HTTP with JSON bodies. */
export interface OtlpExporter {
  /** `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, or `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/traces`. */
  readonly url: string
  /** `OTEL_EXPORTER_OTLP_HEADERS`, then `OTEL_EXPORTER_OTLP_TRACES_HEADERS`: often a credential, never logged. */
  readonly headers: Readonly<Record<string, string>>
  readonly timeoutMillis: number
  readonly gzip: boolean
}

/**
 * Where metrics are served and whether traces are exported, from the standard OpenTelemetry
 * variables: spans are exported only when an OTLP endpoint is set.
 */
export class ObservabilityConfig extends Context.Tag("petstore/ObservabilityConfig")<
  ObservabilityConfig,
  {
    /** The Prometheus listener; none with `METRICS_PORT=off`. */
    readonly metrics: Option.Option<{ readonly host: string; readonly port: number }>
    readonly tracing: Option.Option<Tracing>
  }
>() {
  static readonly config = Config.all({
    // 0 stands for off.
    metricsPort: Config.string("METRICS_PORT").pipe(
      Config.validate({
        message: "must be off or a port number from 1 to 65535",
        validation: (value) =>
          value.trim().toLowerCase() === "off" || (/^\d+$/.test(value.trim()) && Number(value) >= 1 && Number(value) <= 65535)
      }),
      Config.map((value) => value.trim().toLowerCase() === "off" ? 0 : Number(value)),
      Config.withDefault(9464)
    ),
    metricsHost: Config.string("METRICS_HOST").pipe(Config.withDefault("127.0.0.1")),
    endpoint: Config.option(otlpUrl("OTEL_EXPORTER_OTLP_ENDPOINT")),
    tracesEndpoint: Config.option(otlpUrl("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")),
    disabled: Config.boolean("OTEL_SDK_DISABLED").pipe(Config.withDefault(false)),
    exporter: Config.literal("otlp", "none")("OTEL_TRACES_EXPORTER").pipe(Config.withDefault("otlp")),
    serviceName: Config.string("OTEL_SERVICE_NAME").pipe(Config.option),
    resourceAttributes: keyValueList("OTEL_RESOURCE_ATTRIBUTES"),
    sampler: Config.literal(...samplerNames)("OTEL_TRACES_SAMPLER").pipe(Config.withDefault("parentbased_always_on")),
    ratio: Config.number("OTEL_TRACES_SAMPLER_ARG").pipe(
      Config.validate({ message: "must be a number from 0 to 1", validation: (n) => n >= 0 && n <= 1 }),
      Config.withDefault(1)
    ),
    maxQueueSize: positiveInteger("OTEL_BSP_MAX_QUEUE_SIZE", 2048),
    maxExportBatchSize: positiveInteger("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512),
    scheduleDelayMillis: positiveInteger("OTEL_BSP_SCHEDULE_DELAY", 5000),
    exportTimeoutMillis: positiveInteger("OTEL_BSP_EXPORT_TIMEOUT", 30000),
    headers: keyValueList("OTEL_EXPORTER_OTLP_HEADERS"),
    tracesHeaders: keyValueList("OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
    timeout: positiveInteger("OTEL_EXPORTER_OTLP_TIMEOUT", 10000),
    tracesTimeout: Config.option(positiveInteger("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")),
    compression: Config.literal("gzip", "none")("OTEL_EXPORTER_OTLP_COMPRESSION").pipe(Config.withDefault("none")),
    tracesCompression: Config.option(Config.literal("gzip", "none")("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"))
  }).pipe(
    Config.map((c) => ({
      metrics: c.metricsPort === 0 ? Option.none() : Option.some({ host: c.metricsHost, port: c.metricsPort }),
      tracing: (Option.isNone(c.endpoint) && Option.isNone(c.tracesEndpoint)) || c.disabled || c.exporter === "none"
        ? Option.none()
        : Option.some({
          serviceName: Option.getOrElse(c.serviceName, () => c.resourceAttributes["service.name"] ?? "petstore"),
          resourceAttributes: c.resourceAttributes,
          sampler: c.sampler as SamplerName,
          ratio: c.ratio,
          batch: {
            maxQueueSize: c.maxQueueSize,
            // As OpenTelemetry's SDK does, a batch is never larger than the queue.
            maxExportBatchSize: Math.min(c.maxExportBatchSize, c.maxQueueSize),
            scheduleDelayMillis: c.scheduleDelayMillis,
            exportTimeoutMillis: c.exportTimeoutMillis
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

  static readonly layer = Layer.effect(ObservabilityConfig, ObservabilityConfig.config)

  /** Neither metrics nor traces, unless given: for tests and for composing the service in code. */
  static readonly make = (config: Partial<ObservabilityConfig["Type"]> = {}) =>
    Layer.succeed(ObservabilityConfig, { metrics: Option.none(), tracing: Option.none(), ...config })
}

/** A W3C Baggage-like list, `key=value,key=value`, as the OpenTelemetry variables take it. */
function keyValueList(name: string) {
  return Config.string(name).pipe(
    Config.validate({
      message: "must be comma-separated key=value pairs",
      validation: (list) => list.trim() === "" || list.split(",").every((pair) => /^[^=]+=.*$/.test(pair.trim()))
    }),
    Config.map(parseAttributes),
    Config.withDefault({} as Record<string, string>)
  )
}

function positiveInteger(name: string): Config.Config<number>
function positiveInteger(name: string, fallback: number): Config.Config<number>
function positiveInteger(name: string, fallback?: number) {
  const value = Config.integer(name).pipe(
    Config.validate({ message: "must be a whole number above 0", validation: (n) => n > 0 })
  )
  return fallback === undefined ? value : Config.withDefault(value, fallback)
}

function otlpUrl(name: string) {
  return Config.string(name).pipe(
    Config.validate({
      message: "must be an absolute http(s) URL of an OTLP/HTTP receiver",
      validation: (value) => {
        try {
          return ["http:", "https:"].includes(new URL(value).protocol)
        } catch {
          return false
        }
      }
    })
  )
}

/** The W3C Baggage-like list of the specification: values may be percent-encoded. */
function parseAttributes(list: string): Record<string, string> {
  const attributes: Record<string, string> = {}
  for (const pair of list.split(",")) {
    const at = pair.indexOf("=")
    if (at <= 0) continue
    const value = pair.slice(at + 1).trim()
    try {
      attributes[pair.slice(0, at).trim()] = decodeURIComponent(value)
    } catch {
      attributes[pair.slice(0, at).trim()] = value
    }
  }
  return attributes
}
