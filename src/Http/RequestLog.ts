import { Context, Effect, Layer } from "effect"
import type { RequestRecord } from "../Request/CurrentRequest.js"
import { pathOf } from "./Routes.js"

// The most whole lines within 4 KiB, or one longer line; past ASCII a character takes up to 3 bytes.
const [ascii, wide] = [4096, 1365].map((size) => new RegExp(`[^]{0,${size - 1}}\\n|[^\\n]+\\n`, "g"))

export class RequestLines extends Context.Service<RequestLines, { readonly add: (line: string) => void }>()(
  "petstore/RequestLines"
) {
  /** Lines to `write` held at most 50 ms or 64 KiB; the rest at the release or on `exit` (fatal error, late stop). */
  static readonly layer = (write: (chunk: string) => void) =>
    Layer.effect(RequestLines)(Effect.gen(function*() {
      let buffer = ""
      let timer: ReturnType<typeof setTimeout> | undefined
      const flush = () => {
        clearTimeout(timer)
        timer = undefined
        // Whole lines, 4 KiB at most a write (PIPE_BUF, one piece on a pipe): workers sharing stdout cut no line.
        for (const piece of buffer.match(Buffer.byteLength(buffer) === buffer.length ? ascii : wide) ?? []) write(piece)
        buffer = ""
      }
      process.on("exit", flush)
      yield* Effect.addFinalizer(() => Effect.sync(() => (process.off("exit", flush), flush())))
      return {
        add: (line: string) => {
          buffer += line + "\n"
          if (buffer.length > 64 * 1024) flush()
          else timer ??= setTimeout(flush, 50).unref()
        }
      }
    }))

  /** Synchronous in Bun, waiting out a full pipe: what `exit` flushes is written; `process.stdout.write` queues. */
  static readonly Stdout = RequestLines.layer((chunk) => console.log(chunk.slice(0, -1)))
}

/** A JSON line, no header or query; not `Logger` ([benchmarks](../../docs/benchmarks.md#the-librarys-pieces)). */
export const makeRequestLog = (log: (line: string) => void) => {
  let lastMillis = -1
  let lastTimestamp = ""
  const timestampAt = (millis: number) => {
    if (millis !== lastMillis) [lastMillis, lastTimestamp] = [millis, new Date(millis).toISOString()]
    return lastTimestamp
  }
  return (record: RequestRecord, route: string, status: number): void => {
    const { request } = record
    // A span the export could not hold has all-zero ids, which name no trace.
    const span = record.trace?.sampled === true ? record.trace : undefined
    const durationMs = Math.round((performance.now() - record.startedAt) * 100) / 100
    // Only method and path need escaping: the rest is checked or the service's own.
    log(
      `{"message":"request","logLevel":"INFO","timestamp":"${timestampAt(Date.now())}","annotations":{` +
        `"method":${JSON.stringify(request.method)},"path":${JSON.stringify(pathOf(request.url))},"route":"${route}",` +
        `"status":${status},"durationMs":${durationMs},"requestId":"${record.id}",` +
        `"client":"${record.clientAddress.text}"` +
        (span === undefined ? "}}" : `,"trace_id":"${span.traceId}","span_id":"${span.spanId}"}}`)
    )
  }
}
