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
 * Every request answers by `deadline` (under Bun's 10 s idle timeout): its work interrupted, 503 `database_unavailable`
 * when waiting on a store, else `request_timeout`. The server runs a request uninterruptibly but for its handler.
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
