import { Cause, Clock, Duration, Effect, Exit, Fiber, Latch } from "effect"
import type { HttpServerResponse } from "effect/http"
import { retryAfterHeader, ServiceUnavailable } from "../Domain/ApiError.js"
import { CurrentRequest, type RequestRecord } from "../Request/CurrentRequest.js"
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

/** A request still being served, and when it is due: its work's fiber until it ends. */
interface Due {
  readonly at: number
  readonly record: RequestRecord | undefined
  work: Fiber.Fiber<unknown, unknown> | undefined
  /** Whether the deadline interrupted the work, and where it found it waiting. */
  interrupted: "elsewhere" | "on the database" | undefined
}

/** Past this many ended requests at its head, the queue is compacted. */
const compactAfter = 4096

/**
 * Every request answers by `deadline`, on Effect's clock: past it, the request's work is
 * interrupted and the answer is 503 with `Retry-After`. A request found waiting on a store
 * (`waitingOnDatabase`) is answered `database_unavailable` and logged as the database's other
 * faults are, so that a client sees one code for one fault; any other, `request_timeout`. Kept
 * well under Bun's 10 s idle timeout, which would otherwise close the connection unanswered and
 * the request be logged as if its client had gone (499).
 *
 * A request's work runs in a fiber of its own, started at once: one that answers without waiting
 * (a request on SQLite) is done before anything else is made for it. One that waits is queued with
 * when it is due, and a single fiber for all requests interrupts each one still running then.
 * The deadline is the same for every request, so requests fall due in the order they came and the
 * queue is first in, first out: that fiber sleeps until the first one is due. A race of the work
 * against a sleep per request (`Effect.timeoutOrElse`: two fibers and a timer each) cost 3–5% of
 * the requests per second on Effect 4, and made every request wait for the scheduler's next turn.
 *
 * The server runs a request uninterruptibly apart from its route's handler, so the work is made
 * interruptible here, by its deadline and by a client that goes away alike (the request's fiber
 * interrupted, its work with it). A database call being interrupted may first wait for the driver
 * (PostgreSQL's cancel request); the database timeouts, shorter than the deadline, bound those waits.
 */
export const makeDeadline = (deadline: Duration.Duration) =>
  Effect.gen(function*() {
    const millis = Duration.toMillis(deadline)
    const databaseSilent = `The database did not answer within the request's deadline, ${
      Duration.format(deadline)
    } (REQUEST_TIMEOUT_SECONDS)`
    const queue: Array<Due> = []
    let head = 0
    // Closed while nothing is queued; a request queued then opens it.
    const queued = yield* Latch.make(false)
    let idle = true

    const enforce = Effect.gen(function*() {
      while (true) {
        while (head < queue.length && queue[head]!.work === undefined) head++
        if (head === queue.length) {
          queue.length = 0
          head = 0
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
        const wait = next.at - (yield* Clock.currentTimeMillis)
        if (wait > 0) {
          yield* Effect.sleep(wait)
          continue
        }
        head++
        // Read before the interruption: the store call ends with it.
        next.interrupted = (next.record?.databaseWaits ?? 0) > 0 ? "on the database" : "elsewhere"
        next.work!.interruptUnsafe()
      }
    })
    yield* Effect.forkScoped(enforce)

    return <E, R>(
      app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
    ): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R> =>
      Effect.withFiber((fiber) => {
        const at = fiber.getRef(Clock.Clock).currentTimeMillisUnsafe() + millis
        return Effect.flatMap(
          Effect.forkChild(app, { startImmediately: true, uninterruptible: false }),
          (work) => {
            const answered = work.pollUnsafe()
            if (answered !== undefined) return answered
            const record = fiber.getRef(CurrentRequest)
            const due: Due = { at, record, work, interrupted: undefined }
            queue.push(due)
            if (idle) {
              idle = false
              queued.openUnsafe()
            }
            return Effect.flatMap(
              Effect.onExit(Effect.interruptible(Fiber.await(work)), () =>
                Effect.sync(() => void (due.work = undefined))),
              (exit) => {
                if (due.interrupted === undefined || Exit.isSuccess(exit) || !Cause.hasInterrupts(exit.cause)) {
                  return exit
                }
                if (due.interrupted === "elsewhere") {
                  return answeredEarly(timedOut)
                }
                return Effect.andThen(
                  warnUnavailable(record?.id, databaseSilent),
                  answeredEarly(databaseUnavailableResponse)
                )
              }
            )
          }
        )
      })
  })
