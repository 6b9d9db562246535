import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { TestClock } from "effect/testing"
import { makeDeadline } from "../src/Http/RequestDeadline.js"
import { makeRequestObserver } from "../src/Http/RequestObserver.js"
import { makeClientAddress } from "../src/Request/ClientAddress.js"

const deadlineMillis = 150
// How much later the second of two requests comes.
const laterMillis = 100

interface Answered {
  readonly response: HttpServerResponse.HttpServerResponse
  /** On the test clock. */
  readonly at: number
}

/**
 * A request that `app` serves under one deadline for all, run as the server runs a request: in a
 * fiber of its own, uninterruptibly but for what the deadline makes interruptible, its record
 * made where it enters; its answer, with when it came on the test clock.
 */
const makeServe = Effect.gen(function*() {
  const deadline = yield* makeDeadline(Duration.millis(deadlineMillis))
  const observe = makeRequestObserver({ clientAddress: makeClientAddress([]), metrics: false, tracing: undefined })
  return (app: Effect.Effect<HttpServerResponse.HttpServerResponse>) =>
    observe(HttpServerRequest.fromWeb(new Request("http://petstore.test/v1/pets")), deadline(app)).pipe(
      Effect.flatMap((response) => Effect.map(Clock.currentTimeMillis, (at): Answered => ({ response, at }))),
      Effect.uninterruptible,
      Effect.forkChild
    )
})

const answered = ({ at, response }: Answered) => {
  const body = response.body._tag === "Uint8Array" ? JSON.parse(new TextDecoder().decode(response.body.body)) : undefined
  return { status: response.status, retryAfter: response.headers["retry-after"], code: body?.code, at }
}

describe("the request deadline, on Effect's clock", () => {
  it.effect("interrupts a request still running at its deadline and answers 503 request_timeout with Retry-After", () =>
    Effect.gen(function*() {
      const serve = yield* makeServe
      let interrupted = false
      const request = yield* serve(Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => (interrupted = true)))))
      yield* TestClock.adjust(deadlineMillis - 1)
      expect(request.pollUnsafe()).toBeUndefined()
      yield* TestClock.adjust(1)
      expect(answered(yield* Fiber.join(request))).toEqual({
        status: 503,
        retryAfter: "1",
        code: "request_timeout",
        at: deadlineMillis
      })
      expect(interrupted).toBe(true)
    }))

  it.effect("gives each request its own deadline, from when it came, and leaves one that answers in time alone", () =>
    Effect.gen(function*() {
      const serve = yield* makeServe
      const first = yield* serve(Effect.never)
      yield* TestClock.adjust(laterMillis)
      const second = yield* serve(Effect.never)
      const quick = yield* serve(Effect.as(Effect.sleep("20 millis"), HttpServerResponse.jsonUnsafe({ done: true })))
      yield* TestClock.adjust(deadlineMillis - laterMillis)
      expect(answered(yield* Fiber.join(first))).toMatchObject({ status: 503, at: deadlineMillis })
      expect(answered(yield* Fiber.join(quick))).toMatchObject({ status: 200, at: laterMillis + 20 })
      // The second came later: its deadline is its own, not the first one's.
      expect(second.pollUnsafe()).toBeUndefined()
      yield* TestClock.adjust(laterMillis)
      expect(answered(yield* Fiber.join(second))).toMatchObject({ status: 503, at: laterMillis + deadlineMillis })
    }))

  it.effect("keeps deadlines after a quiet spell: a request that comes once every earlier one has ended still has one", () =>
    Effect.gen(function*() {
      const serve = yield* makeServe
      expect(answered(yield* Fiber.join(yield* serve(Effect.succeed(HttpServerResponse.jsonUnsafe({ done: true }))))))
        .toMatchObject({ status: 200, at: 0 })
      yield* TestClock.adjust(deadlineMillis + 50)
      const late = yield* serve(Effect.never)
      yield* TestClock.adjust(deadlineMillis)
      expect(answered(yield* Fiber.join(late))).toMatchObject({ status: 503, at: 2 * deadlineMillis + 50 })
    }))
})
