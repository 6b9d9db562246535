import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber } from "effect"
import { withDeadline } from "../src/Http/RequestDeadline.js"
import { makeClientAddress } from "../src/Request/ClientAddress.js"
import { enterRequest } from "../src/Request/CurrentRequest.js"

const deadlineMillis = 150
// How much later the second of two requests comes: apart by more than a loaded machine's timer lateness.
const laterMillis = 100

interface Answered {
  readonly response: HttpServerResponse.HttpServerResponse
  readonly at: number
}

/**
 * The answer to a request that `app` serves under one deadline for all, run as the platform runs
 * a request: in a fiber of its own, uninterruptibly but for what the deadline makes interruptible,
 * its response handed over before the fiber ends, with when it was.
 */
const makeServe = () => {
  const deadline = withDeadline(Duration.millis(deadlineMillis))
  const clientAddress = makeClientAddress([])
  return (app: Effect.Effect<HttpServerResponse.HttpServerResponse>) =>
    Effect.gen(function*() {
      const response = yield* Deferred.make<Answered>()
      yield* enterRequest(clientAddress, () => deadline(app)).pipe(
        Effect.flatMap((answer) => Deferred.succeed(response, { response: answer, at: performance.now() })),
        Effect.provideService(HttpServerRequest.HttpServerRequest, HttpServerRequest.fromWeb(new Request("http://petstore.test/v1/pets"))),
        Effect.uninterruptible,
        Effect.forkDaemon
      )
      return yield* Deferred.await(response)
    })
}

/** The answer, and the milliseconds since `since` when it came. */
const answered = ({ at, response }: Answered, since: number) => {
  const body = response.body._tag === "Uint8Array" ? JSON.parse(new TextDecoder().decode(response.body.body)) : undefined
  return { status: response.status, retryAfter: response.headers["retry-after"], code: body?.code, after: at - since }
}

describe("the request deadline", () => {
  it.live("interrupts a request still running at its deadline and answers 503 request_timeout with Retry-After", () =>
    Effect.gen(function*() {
      const serve = makeServe()
      let interrupted = false
      const since = performance.now()
      const response = yield* serve(Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => (interrupted = true)))))
      const answer = answered(response, since)
      expect(answer).toMatchObject({ status: 503, retryAfter: "1", code: "request_timeout" })
      expect(answer.after).toBeGreaterThanOrEqual(deadlineMillis - 1)
      expect(answer.after).toBeLessThan(deadlineMillis + 1000)
      expect(interrupted).toBe(true)
    }))

  it.live("gives each request its own deadline, from when it came, and leaves one that answers in time alone", () =>
    Effect.gen(function*() {
      const serve = makeServe()
      const since = performance.now()
      const first = yield* Effect.fork(serve(Effect.never))
      yield* Effect.sleep(`${laterMillis} millis`)
      const second = yield* Effect.fork(serve(Effect.never))
      const quick = yield* Effect.fork(serve(Effect.as(Effect.sleep("20 millis"), HttpServerResponse.unsafeJson({ done: true }))))
      const [a, b, c] = yield* Effect.all([Fiber.join(first), Fiber.join(second), Fiber.join(quick)].map((join) =>
        Effect.map(join, (response) => answered(response, since))
      ))
      expect([a!.status, b!.status, c!.status]).toEqual([503, 503, 200])
      expect(a!.after).toBeGreaterThanOrEqual(deadlineMillis - 1)
      // The second came later: its deadline is its own, not the first one's.
      expect(b!.after).toBeGreaterThanOrEqual(deadlineMillis + laterMillis - 1)
      expect(b!.after - a!.after).toBeGreaterThanOrEqual(laterMillis / 2)
      expect(c!.after).toBeLessThan(deadlineMillis + laterMillis)
    }))

  it.live("keeps deadlines after a quiet spell: a request that comes once every earlier one has ended still has one", () =>
    Effect.gen(function*() {
      const serve = makeServe()
      yield* serve(Effect.succeed(HttpServerResponse.unsafeJson({ done: true })))
      yield* Effect.sleep(`${deadlineMillis + 50} millis`)
      const since = performance.now()
      const late = answered(yield* serve(Effect.never), since)
      expect(late.status).toBe(503)
      expect(late.after).toBeGreaterThanOrEqual(deadlineMillis - 1)
    }))
})
