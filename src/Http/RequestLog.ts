import { Context, Effect, Layer } from "effect"
import type { RequestRecord } from "../Request/CurrentRequest.js"
import { pathOf } from "./Routes.js"

/**
 * Lines written together: one write per turn of the event loop instead of one per request, which
 * under load is most of what logging costs.
 */
export const bufferedLines = (write: (chunk: string) => void) => {
  let buffer = ""
  const flush = () => {
    if (buffer === "") return
    const chunk = buffer
    buffer = ""
    write(chunk)
  }
  return {
    add: (line: string) => {
      if (buffer === "") setImmediate(flush)
      buffer += line + "\n"
      if (buffer.length > 64 * 1024) flush()
    },
    flush
  }
}

/** Where the request log lines go. */
export class RequestLines extends Context.Service<RequestLines, { readonly add: (line: string) => void }>()(
  "petstore/RequestLines"
) {
  /** Buffered lines to `write`, flushed when the layer is released. */
  static readonly layer = (write: (chunk: string) => void) =>
    Layer.effect(
      RequestLines,
      Effect.acquireRelease(Effect.sync(() => bufferedLines(write)), (lines) => Effect.sync(lines.flush))
    )

  static readonly Stdout = RequestLines.layer((chunk) => process.stdout.write(chunk))
}

/**
 * One structured JSON line per request, written as it is answered: method, path, route template
 * (`unmatched` for none), status, duration, request id, the client's address (and, when sampled,
 * the trace and span ids; none for a server span the export could not hold), in the shape of the
 * service's other log lines. Headers and the query string are never logged, so neither is a key.
 *
 * Written by hand rather than through Effect's `Logger` (`Effect.logInfo` with the fields as
 * annotations answers fewer requests a second: [benchmarks](../../docs/benchmarks.md#the-librarys-pieces)):
 * the line written out rather than built as an object for `JSON.stringify`, and its timestamp made
 * once per millisecond. The request id (checked against `[\w.:-]`, or a UUID), the client's
 * address, the trace ids and the route template (a declared path) need no escaping; the method
 * and path are quoted by `JSON.stringify`.
 */
export const makeRequestLog = (log: (line: string) => void) => {
  let lastMillis = -1
  let lastTimestamp = ""
  const timestampAt = (millis: number) => {
    if (millis !== lastMillis) {
      lastMillis = millis
      lastTimestamp = new Date(millis).toISOString()
    }
    return lastTimestamp
  }
  return (record: RequestRecord, route: string, status: number): void => {
    const { request } = record
    // A server span the export could not hold has all-zero ids, which name no trace.
    const span = record.trace?.sampled === true ? record.trace : undefined
    const durationMs = Math.round((performance.now() - record.startedAt) * 100) / 100
    log(
      `{"message":"request","logLevel":"INFO","timestamp":"${timestampAt(Date.now())}","annotations":{` +
        `"method":${JSON.stringify(request.method)},"path":${JSON.stringify(pathOf(request.url))},"route":"${route}",` +
        `"status":${status},"durationMs":${durationMs},"requestId":"${record.id}",` +
        `"client":"${record.clientAddress.text}"` +
        (span === undefined ? "}}" : `,"trace_id":"${span.traceId}","span_id":"${span.spanId}"}}`)
    )
  }
}
