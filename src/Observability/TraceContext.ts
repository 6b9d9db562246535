import type { Headers } from "@effect/platform"
import { Context, Tracer } from "effect"

/** The caller's span, from its W3C `traceparent` (and `tracestate`, kept as received). */
export interface CallerSpan {
  readonly traceId: string
  readonly spanId: string
  readonly sampled: boolean
  readonly traceState: string | undefined
}

// Version, trace id, span id, flags; a later version may add fields, read as version 00's four.
const traceparentPattern = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/
const zeroTraceId = "0".repeat(32)
const zeroSpanId = "0".repeat(16)

/** The W3C limit: a longer `tracestate` may be dropped, and a span's size stays bounded. */
const maxTraceStateLength = 512

/**
 * The caller's span from `traceparent` (W3C Trace Context): undefined when absent or invalid
 * (an all-zero id, version ff, uppercase hex), in which case the request starts a trace.
 */
export const callerSpanOf = (headers: Headers.Headers): CallerSpan | undefined => {
  const traceparent = headers["traceparent"]
  if (traceparent === undefined) return undefined
  const match = traceparentPattern.exec(traceparent.trim())
  if (match === null) return undefined
  const [, version, traceId, spanId, flags, more] = match as unknown as [string, string, string, string, string, string?]
  if (version === "ff" || (version === "00" && more !== undefined)) return undefined
  if (traceId === zeroTraceId || spanId === zeroSpanId) return undefined
  const traceState = headers["tracestate"]?.trim()
  return {
    traceId,
    spanId,
    sampled: (parseInt(flags, 16) & 1) === 1,
    traceState: traceState === undefined || traceState === "" || traceState.length > maxTraceStateLength
      ? undefined
      : traceState
  }
}

/** The `tracestate` a caller sent, carried in its external span's context for the spans of its trace. */
export class CallerTraceState extends Context.Tag("petstore/CallerTraceState")<CallerTraceState, string>() {}

/** The caller's span as Effect's parent for the request's server span. */
export const externalSpanOf = (caller: CallerSpan): Tracer.ExternalSpan =>
  Tracer.externalSpan({
    traceId: caller.traceId,
    spanId: caller.spanId,
    sampled: caller.sampled,
    context: caller.traceState === undefined ? Context.empty() : Context.make(CallerTraceState, caller.traceState)
  })
