import { describe, expect, it } from "@effect/vitest"
import { Headers } from "@effect/platform"
import { makeSampler } from "../src/Observability/Sampler.js"
import { makeSpanQueue } from "../src/Observability/SpanQueue.js"
import { callerSpanOf } from "../src/Observability/TraceContext.js"

const traceId = "0af7651916cd43dd8448eb211c80319c"
const parent = (sampled: boolean, id = traceId) => ({ traceId: id, sampled })
/** Trace ids whose last 56 bits are spread evenly, as random ones are. */
const traceIds = Array.from({ length: 10_000 }, (_, i) =>
  "0".repeat(18) + Math.floor(((i + 0.5) / 10_000) * 2 ** 56).toString(16).padStart(14, "0"))

describe("sampling", () => {
  it("parentbased samplers follow the caller's flag whatever the ratio; the others decide alone", () => {
    for (const ratio of [0, 0.01, 1]) {
      const sample = makeSampler("parentbased_traceidratio", ratio)
      expect(sample(parent(true))).toBe(true)
      expect(sample(parent(false))).toBe(false)
    }
    expect(makeSampler("parentbased_always_on", 1)(parent(false))).toBe(false)
    expect(makeSampler("parentbased_always_off", 1)(parent(true))).toBe(true)
    expect(makeSampler("parentbased_always_on", 1)(undefined)).toBe(true)
    expect(makeSampler("parentbased_always_off", 1)(undefined)).toBe(false)
    expect(makeSampler("always_on", 0)(parent(false))).toBe(true)
    expect(makeSampler("always_off", 1)(parent(true))).toBe(false)
  })

  it("a ratio keeps that share of new traces, and of callers' trace ids, the same ids every time", () => {
    const root = makeSampler("parentbased_traceidratio", 0.01)
    const kept = Array.from({ length: 100_000 }, () => root(undefined)).filter(Boolean).length
    expect(kept).toBeGreaterThan(800)
    expect(kept).toBeLessThan(1200)

    const byId = makeSampler("traceidratio", 0.25)
    const chosen = traceIds.filter((id) => byId(parent(false, id)))
    expect(chosen.length).toBe(2500)
    expect(traceIds.filter((id) => byId(parent(true, id)))).toEqual(chosen)
    expect(traceIds.some((id) => makeSampler("traceidratio", 0)(parent(true, id)))).toBe(false)
    expect(traceIds.every((id) => makeSampler("traceidratio", 1)(parent(false, id)))).toBe(true)
  })
})

describe("traceparent", () => {
  const read = (headers: Record<string, string>) => callerSpanOf(Headers.fromInput(headers))

  it("reads version 00 and a later version's first four fields, with tracestate as it came", () => {
    expect(read({ traceparent: `00-${traceId}-b7ad6b7169203331-01`, tracestate: " rojo=00f067aa0ba902b7,congo=t61rcWkgMzE " }))
      .toEqual({ traceId, spanId: "b7ad6b7169203331", sampled: true, traceState: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE" })
    expect(read({ traceparent: `00-${traceId}-b7ad6b7169203331-00` })?.sampled).toBe(false)
    expect(read({ traceparent: `cc-${traceId}-b7ad6b7169203331-09-what-comes-later` })?.sampled).toBe(true)
  })

  it("ignores what the W3C calls invalid, and a tracestate over 512 characters", () => {
    for (
      const traceparent of [
        `00-${"0".repeat(32)}-b7ad6b7169203331-01`,
        `00-${traceId}-${"0".repeat(16)}-01`,
        `ff-${traceId}-b7ad6b7169203331-01`,
        `00-${traceId.toUpperCase()}-b7ad6b7169203331-01`,
        `00-${traceId}-b7ad6b7169203331-01-more`,
        `00-${traceId}-b7ad6b7169203331`,
        "garbage"
      ]
    ) expect(read({ traceparent })).toBeUndefined()
    expect(read({ traceparent: `00-${traceId}-b7ad6b7169203331-01`, tracestate: `a=${"x".repeat(600)}` })?.traceState)
      .toBeUndefined()
  })
})

describe("the span export queue", () => {
  const settings = { maxQueueSize: 10, maxExportBatchSize: 4, scheduleDelayMillis: 5, exportTimeoutMillis: 1000 }

  it("exports in batches, one at a time; beyond its size a span is dropped and counted, never made", async () => {
    const batches: Array<Array<number>> = []
    // The first export waits for the test's word; the others succeed at once.
    let release = () => {}
    const queue = makeSpanQueue<number>(settings, (batch) => {
      batches.push(batch)
      return batches.length > 1 ? Promise.resolve(undefined) : new Promise((resolve) => (release = () => resolve(undefined)))
    })
    let made = 0
    for (let i = 0; i < 20; i++) queue.offer(() => (made++, i))
    expect(made).toBe(10)
    await new Promise((resolve) => setImmediate(resolve))
    // One batch in flight, taken from the queue, which fills again behind it; the rest are dropped before being made.
    expect(batches).toEqual([[0, 1, 2, 3]])
    for (let i = 20; i < 30; i++) queue.offer(() => (made++, i))
    expect(made).toBe(14)
    const value = (name: string, errorType?: string) =>
      queue.series().find((s) => s.name === name && s.labels.some(([k, v]) => k === "error_type" && v === errorType) === (errorType !== undefined))
    expect(value("otel_sdk_processor_span_processed_total", "queue_full")).toMatchObject({ value: 16 })
    expect(value("otel_sdk_processor_span_queue_size")).toMatchObject({ value: 10 })
    release()
    await queue.flush()
    expect(batches.flat()).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 20, 21, 22, 23])
    expect(value("otel_sdk_exporter_span_exported_total")).toMatchObject({ value: 14 })
  })

  it("counts a failed export's spans by its error, and waits before the next", async () => {
    const sent: Array<number> = []
    const queue = makeSpanQueue<number>(settings, (batch) => (sent.push(Date.now()), Promise.resolve(batch.length > 0 ? "ECONNREFUSED" : undefined)))
    for (let i = 0; i < 8; i++) queue.offer(() => i)
    await new Promise((resolve) => setTimeout(resolve, 300))
    // The first batch failed: the second waits a second rather than following at once.
    expect(sent.length).toBe(1)
    expect(queue.series().find((s) => s.labels.some(([, v]) => v === "ECONNREFUSED"))).toMatchObject({ value: 4 })
    // A stop tries once more, and gives up at the first failure rather than waiting it out.
    await queue.flush()
    expect(sent.length).toBe(2)
  })
})
