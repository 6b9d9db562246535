import { Cause, Clock, Duration, Effect, type Fiber, Latch } from "effect"
import type { HttpServerResponse } from "effect/http"
import { retryAfterHeader, ServiceUnavailable } from "../Domain/ApiError.js"
import { CurrentRequest } from "../Request/CurrentRequest.js"
import { errorResponse } from "../Request/ErrorResponse.js"
import { databaseUnavailableResponse, warnUnavailable } from "../Request/Unavailable.js"
import { isClientAbort } from "./RequestObserver.js"

const timedOut = errorResponse(
  new ServiceUnavailable({
    code: "request_timeout",
    message: "The request took longer than this instance allows; retry",
    status: 503
  }),
  retryAfterHeader("request_timeout")
)

/** A request being served, and when it is due: its fiber until it ends. */
interface Due {
  /** On the clock's monotonic time, in nanoseconds: a step of the wall clock moves no deadline. */
  readonly at: bigint
  fiber: Fiber.Fiber<unknown, unknown> | undefined
  /** Set when the deadline interrupted the request: whether it was waiting on a store then. */
  onDatabase: boolean | undefined
}

/** Past this many ended requests at its head, the queue is compacted. */
const compactAfter = 4096

/**
 * Every request answers by `deadline` (under Bun's 10 s idle timeout): its work interrupted, 503 `database_unavailable`
 * when waiting on a store, else `request_timeout`. One fiber sleeps until the oldest request is due and interrupts the
 * request's own fiber, which the server runs uninterruptibly but for its handler: no fiber or timer per request
 * ([benchmarks](../../docs/benchmarks.md#the-librarys-pieces)). The deadline is the same for all, so the queue is FIFO.
 */
export const makeDeadline = (deadline: Duration.Duration) =>
  Effect.gen(function*() {
    const nanos = Duration.toNanosUnsafe(deadline)
    // Read where it is used, with no yield between a request's check and its interruption.
    const clock = yield* Clock.Clock
    const databaseSilent = `The database did not answer within the request's deadline, ${
      Duration.format(deadline)
    } (REQUEST_TIMEOUT_SECONDS)`
    const queue: Array<Due> = []
    let head = 0
    // Closed while nothing is queued; a request queued then opens it.
    const queued = yield* Latch.make(false)
    let idle = true

    yield* Effect.forkScoped(Effect.gen(function*() {
      while (true) {
        while (head < queue.length && queue[head]!.fiber === undefined) head++
        if (head === queue.length) {
          queue.length = head = 0
          idle = true
          queued.closeUnsafe()
          yield* queued.await
          continue
        }
        if (head > compactAfter) {
          queue.splice(0, head)
          head = 0
        }
        const next = queue[head]!
        const wait = Number(next.at - clock.monotonicTimeNanosUnsafe()) / 1e6
        if (wait > 0) {
          yield* Effect.sleep(wait)
          continue
        }
        head++
        // Read before the interruption: the store call ends with it.
        next.onDatabase = (next.fiber!.getRef(CurrentRequest)?.databaseWaits ?? 0) > 0
        next.fiber!.interruptUnsafe()
      }
    }))

    return <E, R>(
      app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
    ): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R> =>
      Effect.withFiber((fiber) => {
        const due: Due = { at: clock.monotonicTimeNanosUnsafe() + nanos, fiber, onDatabase: undefined }
        queue.push(due)
        if (idle) {
          idle = false
          queued.openUnsafe()
        }
        return Effect.matchCauseEffect(Effect.interruptible(app), {
          onSuccess: (response) => {
            due.fiber = undefined
            return Effect.succeed(response)
          },
          onFailure: (cause) => {
            due.fiber = undefined
            // A client gone meanwhile ends its request as its own doing (499), its clean-up past the deadline or not.
            if (due.onDatabase === undefined || !Cause.hasInterrupts(cause) || isClientAbort(cause)) {
              return Effect.failCause(cause)
            }
            if (!due.onDatabase) return Effect.succeed(timedOut)
            const id = fiber.getRef(CurrentRequest)?.id
            return Effect.as(warnUnavailable(id, databaseSilent), databaseUnavailableResponse)
          }
        })
      })
  })
