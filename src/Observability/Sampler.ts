import type { SamplerName } from "./ObservabilityConfig.js"

/** Whether a trace is recorded, asked once where it enters the service: its parent, if any, came from elsewhere. */
export type Sampler = (parent: { readonly traceId: string; readonly sampled: boolean } | undefined) => boolean

/** `ratio` of trace ids, by the id's random last 56 bits (W3C level 2): services at one ratio keep the same traces. */
const byTraceId = (ratio: number) => {
  if (ratio <= 0) return () => false
  if (ratio >= 1) return () => true
  const threshold = (1 - ratio) * 2 ** 56
  return (traceId: string) => parseInt(traceId.slice(18), 16) >= threshold
}

/** The OpenTelemetry samplers named by `OTEL_TRACES_SAMPLER`, with `OTEL_TRACES_SAMPLER_ARG` as the ratio. */
export const makeSampler = (name: SamplerName, ratio: number): Sampler => {
  const ratioSampled = byTraceId(ratio)
  // A new trace's id is yet to be drawn: drawing the decision instead is the same chance.
  const root = ratio <= 0 ? () => false : ratio >= 1 ? () => true : () => Math.random() < ratio
  const samplers: Record<SamplerName, Sampler> = {
    always_on: () => true,
    always_off: () => false,
    traceidratio: (parent) => parent === undefined ? root() : ratioSampled(parent.traceId),
    parentbased_always_on: (parent) => parent?.sampled ?? true,
    parentbased_always_off: (parent) => parent?.sampled ?? false,
    parentbased_traceidratio: (parent) => parent === undefined ? root() : parent.sampled
  }
  return samplers[name]
}
