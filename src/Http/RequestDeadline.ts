import type { HttpApp } from "@effect/platform"
import { Cause, Duration, Effect, FiberId, HashSet } from "effect"
import { ServiceUnavailable } from "../Domain/ApiError.js"
import { answeredEarly, errorResponse } from "./ApiResponses.js"

const timedOut = errorResponse(
  new ServiceUnavailable({
    code: "request_timeout",
    message: "The request took longer than this instance allows (the database is slow or away); retry",
    status: 503
  }),
  { "retry-after": "1" }
)

/** Who interrupts a request at its deadline, told apart from a client that went away. */
const deadlineFiberId = FiberId.make(-2, 0)

/**
 * Every request answers by `deadline`: past it, the request's work is interrupted and the answer
 * is 503 with `Retry-After`. Kept well under Bun's 10 s idle timeout, which would otherwise close
 * the connection unanswered and the request be logged as if its client had gone (499).
 *
 * One timer per request interrupting the request's own fiber, rather than `Effect.timeout`: the
 * fibers a timeout forks and races cost about 5 µs per request, a twentieth of a small request.
 * The platform runs an app uninterruptibly apart from the route's handler, so the app is made
 * interruptible here, and the handler that clears the timer and turns the interruption into the
 * answer always runs (one handler for both, as every step on the request path counts). A
 * database call being interrupted may first wait for the driver (PostgreSQL's cancel request);
 * the database timeouts, shorter than the deadline, bound those waits.
 */
export const withDeadline = (deadline: Duration.Duration) => {
  const millis = Duration.toMillis(deadline)
  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
    Effect.withFiberRuntime((fiber) => {
      const timer = setTimeout(() => fiber.unsafeInterruptAsFork(deadlineFiberId), millis)
      return Effect.matchCauseEffect(Effect.interruptible(app), {
        onSuccess: (response) => {
          clearTimeout(timer)
          return Effect.succeed(response)
        },
        onFailure: (cause) => {
          clearTimeout(timer)
          return HashSet.has(Cause.interruptors(cause), deadlineFiberId)
            ? answeredEarly(timedOut)
            : Effect.failCause(cause)
        }
      })
    })
}
