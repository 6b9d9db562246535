import { HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Exit } from "effect"

const acceptableRequestId = /^[\w.:-]{1,128}$/

/**
 * Gives every response an `X-Request-Id` (the caller's, when it sent a sane one) and writes one
 * structured log line per request: method, path, status, duration and request id. Headers and the
 * query string are never logged, so neither is a key.
 */
export const requestLog = (app: HttpApp.Default): HttpApp.Default<never, HttpServerRequest.HttpServerRequest> =>
  Effect.gen(function*() {
    const start = performance.now()
    const request = yield* HttpServerRequest.HttpServerRequest
    const incoming = request.headers["x-request-id"]
    const requestId = incoming !== undefined && acceptableRequestId.test(incoming) ? incoming : crypto.randomUUID()
    yield* HttpApp.appendPreResponseHandler((_request, response) =>
      Effect.succeed(HttpServerResponse.setHeader(response, "x-request-id", requestId))
    )
    const queryAt = request.url.indexOf("?")
    const path = queryAt === -1 ? request.url : request.url.slice(0, queryAt)
    return yield* app.pipe(
      Effect.annotateLogs("requestId", requestId),
      Effect.onExit((exit) =>
        Effect.logInfo("request").pipe(
          Effect.annotateLogs({
            method: request.method,
            path,
            status: Exit.isSuccess(exit) ? exit.value.status : 500,
            durationMs: Math.round((performance.now() - start) * 100) / 100,
            requestId
          })
        )
      )
    )
  })
