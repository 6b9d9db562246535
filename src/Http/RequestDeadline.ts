import { type Duration, Effect } from "effect"
import type { HttpServerResponse } from "effect/http"
import { ServiceUnavailable } from "../Domain/ApiError.js"
import { errorResponse } from "../Request/ErrorResponse.js"
import { answeredEarly } from "./ApiResponses.js"

const timedOut = errorResponse(
  new ServiceUnavailable({
    code: "request_timeout",
    message: "The request took longer than this instance allows (the database is slow or away); retry",
    status: 503
  }),
  { "retry-after": "1" }
)

/**
 * Every request answers by `deadline`, on Effect's clock: past it, the request's work is
 * interrupted and the answer is 503 with `Retry-After`. Kept well under Bun's 10 s idle timeout,
 * which would otherwise close the connection unanswered and the request be logged as if its client
 * had gone (499).
 *
 * The server runs a request uninterruptibly apart from its route's handler, so the request is made
 * interruptible here, by its deadline and by a client that goes away alike. A database call being
 * interrupted may first wait for the driver (PostgreSQL's cancel request); the database timeouts,
 * shorter than the deadline, bound those waits.
 */
export const withDeadline = (deadline: Duration.Duration) =>
<E, R>(
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R> =>
  Effect.interruptible(Effect.timeoutOrElse(app, { duration: deadline, orElse: () => answeredEarly(timedOut) }))
