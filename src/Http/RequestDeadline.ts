import { Duration, Effect } from "effect"
import type { HttpServerResponse } from "effect/http"
import { retryAfterHeader, ServiceUnavailable } from "../Domain/ApiError.js"
import { CurrentRequest } from "../Request/CurrentRequest.js"
import { errorResponse } from "../Request/ErrorResponse.js"
import { databaseUnavailableResponse, warnUnavailable } from "../Request/Unavailable.js"
import { answeredEarly } from "./ApiResponses.js"

const timedOut = errorResponse(
  new ServiceUnavailable({
    code: "request_timeout",
    message: "The request took longer than this instance allows; retry",
    status: 503
  }),
  retryAfterHeader("request_timeout")
)

/**
 * Every request answers by `deadline`, on Effect's clock: past it, the request's work is
 * interrupted and the answer is 503 with `Retry-After`. A request found waiting on a store
 * (`waitingOnDatabase`) is answered `database_unavailable` and logged as the database's other
 * faults are, so that a client sees one code for one fault; any other, `request_timeout`. Kept
 * well under Bun's 10 s idle timeout, which would otherwise close the connection unanswered and
 * the request be logged as if its client had gone (499).
 *
 * The server runs a request uninterruptibly apart from its route's handler, so the work is made
 * interruptible here, by its deadline and by a client that goes away alike. A database call being
 * interrupted may first wait for the driver (PostgreSQL's cancel request); the database timeouts,
 * shorter than the deadline, bound those waits.
 */
export const makeDeadline = (deadline: Duration.Duration) =>
  Effect.sync(() => {
    const databaseSilent = `The database did not answer within the request's deadline, ${
      Duration.format(deadline)
    } (REQUEST_TIMEOUT_SECONDS)`
    return <E, R>(
      app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
    ): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R> =>
      CurrentRequest.use((record) =>
        Effect.interruptible(Effect.raceFirst(
          app,
          // Where the work waits is read when the deadline passes, before its interruption ends the store call.
          Effect.andThen(Effect.sleep(deadline), () =>
            (record?.databaseWaits ?? 0) > 0
              ? Effect.andThen(warnUnavailable(record?.id, databaseSilent), answeredEarly(databaseUnavailableResponse))
              : answeredEarly(timedOut))
        ))
      )
  })
