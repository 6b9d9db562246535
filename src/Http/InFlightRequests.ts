import { type HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Context, type Duration, Effect, Layer, Schedule } from "effect"
import { ServiceUnavailable } from "../Domain/ApiError.js"
import { errorResponse } from "./ApiResponses.js"
import { requestIdOf } from "./RequestLog.js"

const shuttingDown = errorResponse(
  new ServiceUnavailable({ code: "shutting_down", message: "The instance is shutting down; retry", status: 503 }),
  { connection: "close", "retry-after": "1" }
)

/**
 * Counts the requests being served, so that shutting down can let them finish: once `drain` starts,
 * new requests are refused with 503 and `drain` waits for the running ones.
 */
export class InFlightRequests extends Context.Tag("petstore/InFlightRequests")<
  InFlightRequests,
  {
    readonly middleware: (app: HttpApp.Default) => HttpApp.Default<never, HttpServerRequest.HttpServerRequest>
    readonly drain: (timeout: Duration.DurationInput) => Effect.Effect<void>
  }
>() {
  static readonly layer = Layer.sync(InFlightRequests, () => {
    let running = 0
    let draining = false
    return InFlightRequests.of({
      middleware: (app) =>
        Effect.suspend(() => {
          if (draining) {
            return Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
              HttpServerResponse.setHeader(shuttingDown, "x-request-id", requestIdOf(request)))
          }
          running++
          return Effect.ensuring(app, Effect.sync(() => running--))
        }),
      drain: (timeout) =>
        Effect.suspend(() => {
          draining = true
          return Effect.repeat(Effect.sync(() => running), {
            until: (count) => count === 0,
            schedule: Schedule.spaced("10 millis")
          }).pipe(Effect.timeoutOption(timeout), Effect.asVoid)
        })
    })
  })
}
