import { Context, type Duration, Effect, Layer, Schedule } from "effect"
import type { HttpServerResponse } from "effect/http"
import { ServiceUnavailable } from "../Domain/ApiError.js"
import { errorResponse } from "../Request/ErrorResponse.js"
import { answeredEarly } from "./ApiResponses.js"

const shuttingDown = errorResponse(
  new ServiceUnavailable({ code: "shutting_down", message: "The instance is shutting down; retry", status: 503 }),
  { connection: "close", "retry-after": "1" }
)

/** How long no request may arrive before a draining server is taken to be idle. */
const quietMillis = 250

type App<E, R> = Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>

/**
 * Counts the requests being served, so that shutting down can let them finish: once `drain` starts,
 * new requests are refused with 503 and `Connection: close`, and `drain` waits for the running ones
 * and then for a quiet moment. A keep-alive client may have sent its next request just before the
 * signal; closing at once would reset it unanswered, so every connection that still brings a
 * request gets its 503 (and closes) before the server stops.
 */
export class InFlightRequests extends Context.Service<InFlightRequests, {
  readonly middleware: <E, R>(app: App<E, R>) => App<E, R>
  readonly drain: (timeout: Duration.Input) => Effect.Effect<void>
}>()("petstore/InFlightRequests") {
  static readonly layer = Layer.sync(InFlightRequests, () => {
    let running = 0
    let draining = false
    let lastRefusedAt = 0
    return InFlightRequests.of({
      middleware: (app) =>
        Effect.suspend(() => {
          if (draining) {
            lastRefusedAt = Date.now()
            return answeredEarly(shuttingDown)
          }
          running++
          // However the request ends, its client gone included.
          return Effect.onExit(app, () => Effect.sync(() => void running--))
        }),
      drain: (timeout) =>
        Effect.suspend(() => {
          draining = true
          lastRefusedAt = Date.now()
          // Interruptible: drain runs in a finalizer, where the timeout could not otherwise end it.
          return Effect.interruptible(
            Effect.repeat(Effect.sync(() => running === 0 && Date.now() - lastRefusedAt >= quietMillis), {
              until: (done) => done,
              schedule: Schedule.spaced("10 millis")
            })
          ).pipe(Effect.timeoutOption(timeout), Effect.asVoid)
        })
    })
  })
}
