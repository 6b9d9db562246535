import type { HttpApp } from "@effect/platform"
import { Context, type Duration, Effect, Layer, Schedule } from "effect"
import { ServiceUnavailable } from "../Domain/ApiError.js"
import { answeredEarly, errorResponse } from "./ApiResponses.js"

const shuttingDown = errorResponse(
  new ServiceUnavailable({ code: "shutting_down", message: "The instance is shutting down; retry", status: 503 }),
  { connection: "close", "retry-after": "1" }
)

/** How long no request may arrive before a draining server is taken to be idle. */
const quietMillis = 250

/**
 * Counts the requests being served, so that shutting down can let them finish: once `drain` starts,
 * new requests are refused with 503 and `Connection: close`, and `drain` waits for the running ones
 * and then for a quiet moment. A keep-alive client may have sent its next request just before the
 * signal; closing at once would reset it unanswered, so every connection that still brings a
 * request gets its 503 (and closes) before the server stops.
 */
export class InFlightRequests extends Context.Tag("petstore/InFlightRequests")<
  InFlightRequests,
  {
    readonly middleware: <E, R>(app: HttpApp.Default<E, R>) => HttpApp.Default<E, R>
    readonly drain: (timeout: Duration.DurationInput) => Effect.Effect<void>
  }
>() {
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
          // The platform runs the app uninterruptibly, so this handler always runs.
          return Effect.matchCauseEffect(app, {
            onFailure: (cause) => (running--, Effect.failCause(cause)),
            onSuccess: (response) => (running--, Effect.succeed(response))
          })
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
