/**
 * OTLP/HTTP's JSON encoding of spans, written straight into strings: no intermediate objects per
 * span, and nothing of a span (its exit, its attributes' values) kept alive until the export.
 */

/** A span as it is exported; times in nanoseconds since the epoch. */
export interface ExportedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly parentIsRemote: boolean
  readonly traceState: string | undefined
  readonly name: string
  /** OTLP's numbering: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  readonly kind: number
  readonly startTime: bigint
  readonly endTime: bigint
  readonly attributes: Iterable<readonly [string, unknown]>
  readonly events: ReadonlyArray<{ readonly name: string; readonly time: bigint; readonly attributes: Iterable<readonly [string, unknown]> }>
  readonly droppedEventsCount: number
  readonly links: ReadonlyArray<{ readonly traceId: string; readonly spanId: string; readonly attributes: Iterable<readonly [string, unknown]> }>
  /** 1 ok, 2 error. */
  readonly status: { readonly code: number; readonly message?: string | undefined }
}

const text = JSON.stringify

const anyValue = (value: unknown): string => {
  switch (typeof value) {
    case "string":
      return `{"stringValue":${text(value)}}`
    case "number":
      if (!Number.isFinite(value)) return `{"stringValue":"${value}"}`
      return Number.isInteger(value) ? `{"intValue":${value}}` : `{"doubleValue":${value}}`
    case "boolean":
      return `{"boolValue":${value}}`
    case "bigint":
      return `{"intValue":"${value}"}`
    default:
      if (Array.isArray(value)) return `{"arrayValue":{"values":[${value.map(anyValue).join(",")}]}}`
      try {
        return `{"stringValue":${text(text(value) ?? String(value))}}`
      } catch {
        return `{"stringValue":${text(String(value))}}`
      }
  }
}

/** OTLP's list of key-value pairs. */
export const keyValues = (entries: Iterable<readonly [string, unknown]>): string => {
  let out = "["
  let first = true
  for (const [key, value] of entries) {
    out += `${first ? "" : ","}{"key":${text(key)},"value":${anyValue(value)}}`
    first = false
  }
  return out + "]"
}

// OTLP span flags: the W3C flags (sampled), and whether the parent is known to be remote or not.
const hasIsRemote = 0x100
const isRemote = 0x200

/** One span's JSON, made when it ends: a string is all the export queue keeps of it. */
export const spanJson = (s: ExportedSpan): string =>
  `{"traceId":"${s.traceId}","spanId":"${s.spanId}"` +
  (s.parentSpanId === undefined ? "" : `,"parentSpanId":"${s.parentSpanId}"`) +
  (s.traceState === undefined ? "" : `,"traceState":${text(s.traceState)}`) +
  `,"name":${text(s.name)},"kind":${s.kind},"startTimeUnixNano":"${s.startTime}","endTimeUnixNano":"${s.endTime}"` +
  `,"attributes":${keyValues(s.attributes)}` +
  (s.events.length === 0
    ? ""
    : `,"events":[${
      s.events.map((e) => `{"name":${text(e.name)},"timeUnixNano":"${e.time}","attributes":${keyValues(e.attributes)}}`).join(",")
    }]`) +
  (s.droppedEventsCount === 0 ? "" : `,"droppedEventsCount":${s.droppedEventsCount}`) +
  (s.links.length === 0
    ? ""
    : `,"links":[${
      s.links.map((l) => `{"traceId":"${l.traceId}","spanId":"${l.spanId}","attributes":${keyValues(l.attributes)}}`).join(",")
    }]`) +
  `,"status":{"code":${s.status.code}${s.status.message === undefined ? "" : `,"message":${text(s.status.message)}`}}` +
  `,"flags":${1 | hasIsRemote | (s.parentIsRemote ? isRemote : 0)}}`

/** The body of one export: the spans (`spanJson`) of this process (`resource`) and its instrumentation scope. */
export const exportRequest = (resource: string, scope: string, spans: ReadonlyArray<string>): string =>
  `{"resourceSpans":[{"resource":{"attributes":${resource}},"scopeSpans":[{"scope":{"name":${text(scope)}},"spans":[${
    spans.join(",")
  }]}]}]}`
