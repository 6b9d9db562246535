import { type HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { type Duration, Effect } from "effect"
import { ServiceUnavailable } from "../Domain/ApiError.js"
import { errorResponse } from "./ApiResponses.js"
import { requestIdOf } from "./RequestLog.js"

const timedOut = errorResponse(
  new ServiceUnavailable({
    code: "request_timeout",
    message: "The request took longer than this instance allows (the database is slow or away); retry",
    status: 503
  }),
  { "retry-after": "1" }
)

/**
 * Every request answers within `deadline`: past it, 503 with `Retry-After`. Kept well under Bun's
 * 10 s idle timeout, which would otherwise close the connection unanswered and the request be
 * logged as if its client had gone (499). Disconnected: a handler waiting in a part that cannot
 * be interrupted at once (a database call) finishes in the background, after the answer.
 */
export const withDeadline = (deadline: Duration.Duration) => (app: HttpApp.Default): HttpApp.Default =>
  // Interruptible: the platform runs an app and its middleware uninterruptibly (only the route's
  // handler is not), where the timeout could not end the wait.
  Effect.interruptible(Effect.timeoutTo(Effect.disconnect(app), {
    duration: deadline,
    onSuccess: (response) => Effect.succeed(response),
    onTimeout: () =>
      Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
        HttpServerResponse.setHeader(timedOut, "x-request-id", requestIdOf(request)))
  })).pipe(Effect.flatten)
