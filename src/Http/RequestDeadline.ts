import type { HttpApp } from "@effect/platform"
import { Cause, Duration, Effect, type Fiber, FiberId, HashSet } from "effect"
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

/** A request in flight: its fiber, and when its deadline passes (`performance.now()` time). */
interface Due {
  readonly fiber: Fiber.RuntimeFiber<unknown, unknown>
  readonly at: number
}

/**
 * Every request answers by `deadline`: past it, the request's work is interrupted and the answer
 * is 503 with `Retry-After`. Kept well under Bun's 10 s idle timeout, which would otherwise close
 * the connection unanswered and the request be logged as if its client had gone (499).
 *
 * Every request has the same deadline, so the requests in flight, kept in the order they came,
 * are also in the order they fall due: one timer, set for the first of them, interrupts every
 * request then due and is set again for the next. A request that ends leaves the set; a timer
 * that finds the first request gone is set again for the one now first. A timer per request
 * (`setTimeout` and `clearTimeout` around each) cost 2–3% of a small request's CPU in process
 * (`bun scripts/bench/request-path.ts`, with and without it), `Effect.timeout`'s forked race
 * about 5 µs a request. The timer does not keep the process alive: a stopping server waits for
 * its requests, not for their deadlines.
 *
 * The platform runs an app uninterruptibly apart from the route's handler, so the app is made
 * interruptible here, and the handler that leaves the set and turns the interruption into the
 * answer always runs (one handler for both, as every step on the request path counts). A
 * database call being interrupted may first wait for the driver (PostgreSQL's cancel request);
 * the database timeouts, shorter than the deadline, bound those waits.
 */
export const withDeadline = (deadline: Duration.Duration) => {
  const millis = Duration.toMillis(deadline)
  const inFlight = new Set<Due>()
  let timer: ReturnType<typeof setTimeout> | undefined
  const interruptDue = () => {
    timer = undefined
    const now = performance.now()
    for (const due of inFlight) {
      if (due.at > now) {
        arm(due)
        return
      }
      inFlight.delete(due)
      due.fiber.unsafeInterruptAsFork(deadlineFiberId)
    }
  }
  const arm = (first: Due) => {
    timer = setTimeout(interruptDue, Math.max(0, first.at - performance.now()))
    timer.unref()
  }
  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
    Effect.withFiberRuntime((fiber) => {
      const due: Due = { fiber, at: performance.now() + millis }
      inFlight.add(due)
      if (timer === undefined) arm(due)
      return Effect.matchCauseEffect(Effect.interruptible(app), {
        onSuccess: (response) => {
          inFlight.delete(due)
          return Effect.succeed(response)
        },
        onFailure: (cause) => {
          inFlight.delete(due)
          return HashSet.has(Cause.interruptors(cause), deadlineFiberId)
            ? answeredEarly(timedOut)
            : Effect.failCause(cause)
        }
      })
    })
}
