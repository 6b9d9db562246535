import { Tracer } from "effect"
import type { Headers } from "effect/http"

// Version, trace id, span id, flags; a later version may add fields, read as version 00's four.
const traceparentPattern = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/
const zeroTraceId = "0".repeat(32)
const zeroSpanId = "0".repeat(16)

/**
 * The caller's span from `traceparent`, if valid. Not `HttpTraceContext`: it refuses every version but 00, which W3C
 * asks to read by version 00's fields, and follows B3 headers, which this service never honoured.
 */
export const callerSpanOf = (headers: Headers.Headers): Tracer.ExternalSpan | undefined => {
  const traceparent = headers["traceparent"]
  if (traceparent === undefined) return undefined
  const match = traceparentPattern.exec(traceparent.trim())
  if (match === null) return undefined
  // The optional group is undefined when absent, whatever the array's type says.
  const [, version, traceId, spanId, flags, more]: ReadonlyArray<string | undefined> = match
  if (version === "ff" || (version === "00" && more !== undefined)) return undefined
  if (traceId === zeroTraceId || spanId === zeroSpanId) return undefined
  return Tracer.externalSpan({ traceId: traceId!, spanId: spanId!, sampled: (parseInt(flags!, 16) & 1) === 1 })
}
