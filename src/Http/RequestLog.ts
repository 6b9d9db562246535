import type { HttpApp } from "@effect/platform"
import { HttpServerRequest } from "@effect/platform"
import { Context, Effect, Layer } from "effect"
import type { ClientAddress } from "../Request/ClientAddress.js"
import { serverSpanOf } from "./RequestObserver.js"
import { statusOf } from "./RequestStatus.js"
import { pathOf } from "./Routes.js"

const acceptableRequestId = /^[\w.:-]{1,128}$/

/**
 * The id of each request being served, for the rare log line that needs it. Kept beside the
 * request rather than as a log annotation: annotating every request's fiber costs more than half
 * the throughput of a small request.
 */
const requestIds = new WeakMap<HttpServerRequest.HttpServerRequest, string>()

export const requestIdOf = (request: HttpServerRequest.HttpServerRequest): string =>
  requestIds.get(request) ?? "unknown"

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
export class RequestLines extends Context.Tag("petstore/RequestLines")<
  RequestLines,
  { readonly add: (line: string) => void }
>() {
  /** Buffered lines to `write`, flushed when the layer is released. */
  static readonly layer = (write: (chunk: string) => void) =>
    Layer.scoped(
      RequestLines,
      Effect.acquireRelease(Effect.sync(() => bufferedLines(write)), (lines) => Effect.sync(lines.flush))
    )

  static readonly Stdout = RequestLines.layer((chunk) => process.stdout.write(chunk))
}


/**
 * Names every request (the caller's `X-Request-Id` when it sent a sane one, else a new one; the API
 * puts it on the response) and, when `log` is given, writes one structured JSON line per request:
 * method, path, status, duration, request id, the client's address (and, when sampled, the trace
 * and span ids), in the shape of the service's other log lines. Headers and the query string are
 * never logged, so neither is a key.
 */
export const makeRequestLog = (
  log: ((line: string) => void) | undefined,
  clientAddress: (request: HttpServerRequest.HttpServerRequest) => ClientAddress
) =>
(app: HttpApp.Default): HttpApp.Default<never, HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const start = performance.now()
    const incoming = request.headers["x-request-id"]
    requestIds.set(
      request,
      incoming !== undefined && acceptableRequestId.test(incoming) ? incoming : crypto.randomUUID()
    )
    if (log === undefined) return app
    return Effect.onExit(app, (exit) =>
      Effect.sync(() => {
        const span = serverSpanOf(request)
        log(JSON.stringify({
          message: "request",
          logLevel: "INFO",
          timestamp: new Date().toISOString(),
          annotations: {
            method: request.method,
            path: pathOf(request.url),
            status: statusOf(exit),
            durationMs: Math.round((performance.now() - start) * 100) / 100,
            requestId: requestIdOf(request),
            client: clientAddress(request).text,
            ...(span === undefined ? {} : { trace_id: span.traceId, span_id: span.spanId })
          }
        }))
      }))
  })
