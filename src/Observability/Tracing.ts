import * as OtelResource from "@effect/opentelemetry/Resource"
import * as OtelTracer from "@effect/opentelemetry/Tracer"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler
} from "@opentelemetry/sdk-trace-base"
import { Effect, Layer, Option } from "effect"
import { ObservabilityConfig, type Tracing } from "./ObservabilityConfig.js"

const samplerOf = ({ ratio, sampler }: Tracing): Sampler => {
  switch (sampler) {
    case "always_on":
      return new AlwaysOnSampler()
    case "always_off":
      return new AlwaysOffSampler()
    case "traceidratio":
      return new TraceIdRatioBasedSampler(ratio)
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() })
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) })
  }
}

/**
 * Spans exported in batches over OTLP/HTTP (JSON). The exporter reads its endpoint, headers and
 * timeout from the standard `OTEL_EXPORTER_OTLP_*` variables, the batching from `OTEL_BSP_*`;
 * spans still buffered are sent when the layer is released.
 */
const exportingTracer = (tracing: Tracing) =>
  OtelTracer.layer.pipe(
    Layer.provide(
      Layer.scoped(
        OtelTracer.OtelTracerProvider,
        Effect.flatMap(OtelResource.Resource, (resource) =>
          Effect.acquireRelease(
            Effect.sync(() =>
              new BasicTracerProvider({
                resource,
                sampler: samplerOf(tracing),
                spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())]
              })
            ),
            (provider) =>
              Effect.promise(() => provider.forceFlush().then(() => provider.shutdown())).pipe(
                Effect.timeoutOption("3 seconds")
              )
          ))
      )
    ),
    Layer.provide(
      OtelResource.layer({ serviceName: tracing.serviceName, attributes: tracing.resourceAttributes })
    )
  )

/**
 * Effect's tracer exporting over OTLP when an endpoint is configured. Otherwise the tracer is
 * switched off, so the spans that libraries open (`@effect/sql` opens one per statement) cost
 * nothing either.
 */
export const TracingLive = Layer.unwrapEffect(
  Effect.map(ObservabilityConfig, ({ tracing }) =>
    Option.match(tracing, {
      onNone: () => Layer.setTracerEnabled(false),
      onSome: (tracing) => Layer.discard(exportingTracer(tracing))
    })
  )
)
