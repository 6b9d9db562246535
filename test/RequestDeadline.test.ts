import { describe, expect, it } from "@effect/vitest"
import { Clock, Deferred, Duration, Effect, Fiber, Layer, Logger, References } from "effect"
import { HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { TestClock } from "effect/testing"
import pg from "pg"
import { makeDeadline } from "../src/Http/RequestDeadline.js"
import { makeRequestObserver } from "../src/Http/RequestObserver.js"
import { PetRepository } from "../src/Pets/PetRepository.js"
import { makeInMemoryPetRepository } from "../src/Pets/PetRepositoryInMemory.js"
import { makeClientAddress } from "../src/Request/ClientAddress.js"
import { waitingOnDatabase } from "../src/Request/Unavailable.js"
import { faultyPostgres } from "./support/PostgresFaults.js"
import { createTestDatabase } from "./support/PostgresStores.js"
import { createKey as createKeyWithCommand, startServer } from "./support/ServerProcess.js"
import { answeredOrWaiting, createKey, makeTestServer, send } from "./support/TestServer.js"
import { waitFor } from "./support/WaitFor.js"

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
 * made where it enters, its answer handed on from within that fiber (as the server sends it); its
 * answer, with when it came on the test clock.
 */
const makeServe = Effect.gen(function*() {
  const deadline = yield* makeDeadline(Duration.millis(deadlineMillis))
  const observe = makeRequestObserver({ clientAddress: makeClientAddress([]), metrics: false, tracing: undefined })
  return (app: Effect.Effect<HttpServerResponse.HttpServerResponse>) =>
    Effect.gen(function*() {
      const answer = yield* Deferred.make<Answered>()
      yield* observe(HttpServerRequest.fromWeb(new Request("http://petstore.test/v1/pets")), deadline(app)).pipe(
        Effect.flatMap((response) => Effect.map(Clock.currentTimeMillis, (at): Answered => ({ response, at }))),
        Effect.flatMap((answered) => Deferred.succeed(answer, answered)),
        Effect.uninterruptible,
        Effect.forkChild
      )
      return answer
    })
})

const answered = ({ at, response }: Answered) => {
  const body = response.body._tag === "Uint8Array"
    ? JSON.parse(new TextDecoder().decode(response.body.body))
    : undefined
  return { status: response.status, retryAfter: response.headers["retry-after"], code: body?.code, at }
}

describe("the request deadline, on Effect's clock", () => {
  it.effect("interrupts a request still running at its deadline and answers 503 request_timeout with Retry-After", () =>
    Effect.gen(function*() {
      const serve = yield* makeServe
      let interrupted = false
      const request = yield* serve(Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => (interrupted = true)))))
      yield* TestClock.adjust(deadlineMillis - 1)
      expect(yield* Deferred.isDone(request)).toBe(false)
      yield* TestClock.adjust(1)
      expect(answered(yield* Deferred.await(request))).toEqual({
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
      expect(answered(yield* Deferred.await(first))).toMatchObject({ status: 503, at: deadlineMillis })
      expect(answered(yield* Deferred.await(quick))).toMatchObject({ status: 200, at: laterMillis + 20 })
      // The second came later: its deadline is its own, not the first one's.
      expect(yield* Deferred.isDone(second)).toBe(false)
      yield* TestClock.adjust(laterMillis)
      expect(answered(yield* Deferred.await(second))).toMatchObject({ status: 503, at: laterMillis + deadlineMillis })
    }))

  it.effect("keeps deadlines after a quiet spell: a request that comes once every earlier one has ended still has one", () =>
    Effect.gen(function*() {
      const serve = yield* makeServe
      expect(
        answered(yield* Deferred.await(yield* serve(Effect.succeed(HttpServerResponse.jsonUnsafe({ done: true })))))
      )
        .toMatchObject({ status: 200, at: 0 })
      yield* TestClock.adjust(deadlineMillis + 50)
      const late = yield* serve(Effect.never)
      yield* TestClock.adjust(deadlineMillis)
      expect(answered(yield* Deferred.await(late))).toMatchObject({ status: 503, at: 2 * deadlineMillis + 50 })
    }))
})

describe("the request deadline, under load and beside a client that goes away", () => {
  it.effect("keeps every deadline when thousands of requests fall due at once, many ending on their own as they do", () =>
    Effect.gen(function*() {
      const serve = yield* makeServe
      const done = HttpServerResponse.jsonUnsafe({ done: true })
      for (let i = 0; i < 3000; i++) {
        yield* serve(i % 2 === 0 ? Effect.as(Effect.sleep(deadlineMillis), done) : Effect.never)
      }
      yield* TestClock.adjust(deadlineMillis)
      const late = yield* serve(Effect.never)
      yield* TestClock.adjust(deadlineMillis)
      expect(answered(yield* Deferred.await(late))).toMatchObject({ status: 503, at: 2 * deadlineMillis })
    }))

  it.effect("a client gone before the deadline is logged as its own doing (499), however long its request's clean-up", () =>
    Effect.gen(function*() {
      const deadline = yield* makeDeadline(Duration.millis(deadlineMillis))
      const statuses: Array<number> = []
      const observe = makeRequestObserver({
        clientAddress: makeClientAddress([]),
        metrics: false,
        tracing: undefined,
        ended: (_record, _route, status) => void statuses.push(status)
      })
      // Interrupted, the work cleans up for longer than the deadline (a rollback on a slow database).
      const work = Effect.never.pipe(Effect.onInterrupt(() => Effect.sleep(deadlineMillis * 2)))
      const request = yield* observe(
        HttpServerRequest.fromWeb(new Request("http://petstore.test/v1/pets")),
        deadline(work)
      )
        .pipe(Effect.uninterruptible, Effect.forkChild)
      yield* TestClock.adjust(20)
      request.interruptUnsafe(undefined, HttpServerError.ClientAbort.annotation)
      yield* TestClock.adjust(deadlineMillis * 3)
      yield* Fiber.await(request)
      expect(statuses).toEqual([499])
    }))
})

describe("a deadline that passes while the request waits on its database", () => {
  it.effect("is the database's fault: 503 database_unavailable with Retry-After, as its other faults are answered", () =>
    Effect.gen(function*() {
      const serve = yield* makeServe
      const request = yield* serve(waitingOnDatabase(Effect.never))
      yield* TestClock.adjust(deadlineMillis)
      expect(answered(yield* Deferred.await(request))).toEqual({
        status: 503,
        retryAfter: "1",
        code: "database_unavailable",
        at: deadlineMillis
      })
    }))

  it.effect("a request that had its answer from the database and waits elsewhere at its deadline is still request_timeout", () =>
    Effect.gen(function*() {
      const serve = yield* makeServe
      const request = yield* serve(Effect.andThen(waitingOnDatabase(Effect.sleep("20 millis")), Effect.never))
      yield* TestClock.adjust(deadlineMillis)
      expect(answered(yield* Deferred.await(request))).toMatchObject({
        status: 503,
        retryAfter: "1",
        code: "request_timeout"
      })
    }))

  describe("through the service", () => {
    const requestTimeout = Duration.seconds(2)
    const warnings: Array<{ readonly message: unknown; readonly annotations: Record<string, unknown> }> = []
    const capture = Logger.layer([
      Logger.make(({ fiber, logLevel, message }) => {
        if (logLevel === "Warn") warnings.push({ message, annotations: fiber.getRef(References.CurrentLogAnnotations) })
      })
    ])
    // A database that takes the list and never answers it (frozen, as a store sees it).
    const entered = Promise.withResolvers<void>()
    const frozenList = Layer.effect(
      PetRepository,
      Effect.map(
        makeInMemoryPetRepository,
        (pets) =>
          PetRepository.of({ ...pets, list: () => Effect.andThen(Effect.sync(() => entered.resolve()), Effect.never) })
      )
    )

    it.effect("a list the database never answers: database_unavailable at the deadline, logged as the database's", () =>
      Effect.gen(function*() {
        const { key } = yield* createKey()
        const list = yield* Effect.forkChild(
          send("GET", "/v1/pets", { key, headers: { "x-request-id": "frozen-list" } }),
          {
            startImmediately: true
          }
        )
        // In the store, and its deadline pending: only then is the clock moved.
        yield* Effect.promise(() => entered.promise)
        yield* answeredOrWaiting(list, requestTimeout)
        yield* TestClock.adjust(requestTimeout)
        const answer = yield* Fiber.join(list)
        expect(answer.status).toBe(503)
        expect(answer.headers["retry-after"]).toBe("1")
        // The deadline's own answer carries every response's headers, and those its request noted (the key's quota).
        expect(answer.headers).toMatchObject({
          "x-request-id": "frozen-list",
          "cache-control": "no-store",
          "x-content-type-options": "nosniff",
          "ratelimit-policy": expect.stringContaining("per-key")
        })
        expect(answer.body).toEqual({
          code: "database_unavailable",
          message: "The database cannot serve this request now; retry",
          status: 503
        })
        expect(warnings).toContainEqual({
          message: ["database unavailable"],
          annotations: expect.objectContaining({
            requestId: "frozen-list",
            reason: "The database did not answer within the request's deadline, 2s (REQUEST_TIMEOUT_SECONDS)"
          })
        })
      }).pipe(Effect.provide(Layer.provideMerge(makeTestServer(frozenList, { requestTimeout }), capture))))

    it.effect("a create whose client never ends its body: request_timeout, not the database's", () =>
      Effect.gen(function*() {
        const { key } = yield* createKey()
        const body = new ReadableStream<Uint8Array>({
          start: (controller) => controller.enqueue(new TextEncoder().encode(`{"name":"Rex",`))
        })
        const create = yield* Effect.forkChild(send("POST", "/v1/pets", { key, body }), { startImmediately: true })
        yield* answeredOrWaiting(create, requestTimeout)
        yield* TestClock.adjust(requestTimeout)
        const answer = yield* Fiber.join(create)
        expect(answer.status).toBe(503)
        expect(answer.headers["retry-after"]).toBe("1")
        expect(answer.body).toMatchObject({ code: "request_timeout", status: 503 })
      }).pipe(Effect.provide(makeTestServer(frozenList, { requestTimeout }))))
  })
})

describe("PostgreSQL frozen (SIGSTOP) while requests wait on it", () => {
  it(
    "answers every one 503 database_unavailable with Retry-After, those its deadline ends too: one code for one fault",
    async () => {
      using postgres = faultyPostgres()
      // A statement the server leaves unanswered is given up 0.5 s after its timeout (1.4 s): the
      // deadline (1 s) ends the wait first. A wait for a connection ends at its timeout, before it.
      const env = {
        DATABASE_URL: postgres.url,
        REQUEST_TIMEOUT_SECONDS: "1",
        DATABASE_CONNECT_TIMEOUT_SECONDS: "0.9",
        DATABASE_STATEMENT_TIMEOUT_SECONDS: "0.9"
      }
      const key = await createKeyWithCommand(env, "frozen")
      const server = await startServer({ ...env, LOG_LEVEL: "info" })
      const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
      try {
        // The key used once before the freeze, as a client's would have been.
        expect((await fetch(`${server.url}/v1/pets`, { headers })).status).toBe(200)
        postgres.freeze()
        const answers = await Promise.all(Array.from({ length: 8 }, async (_, n) => {
          const startedAt = performance.now()
          const response = await fetch(
            `${server.url}/v1/pets`,
            n % 2 === 0
              ? { headers }
              : { method: "POST", headers, body: JSON.stringify({ name: `frozen-${n}`, categoryId: 1 }) }
          )
          const body = await response.json()
          return {
            status: response.status,
            retryAfter: response.headers.get("retry-after"),
            body,
            millis: performance.now() - startedAt
          }
        }))
        for (const answer of answers) {
          expect(answer).toMatchObject({
            status: 503,
            retryAfter: "1",
            body: { code: "database_unavailable", status: 503 }
          })
          // The deadline, and a moment for a loaded machine.
          expect(answer.millis).toBeLessThan(1000 + 1000)
        }
        // The deadline answered some of them: the service said so, in the database's warning.
        const warned = () => server.logs().includes(`The database did not answer within the request's deadline, 1s`)
        await waitFor(warned, { what: "the database's warning on the deadline logged", timeout: 1000 })
      } finally {
        postgres.thaw()
        await server.stop()
      }
    },
    30_000
  )
})

describe("PostgreSQL's rate-limit buckets locked by another session (LOCK TABLE rate_limit_buckets)", () => {
  it(
    "a new key's first request, its bucket's refill waiting at the deadline: database_unavailable, logged as the database's",
    async () => {
      await using database = await createTestDatabase()
      // The statement's own timeout (3 s) after the deadline (1 s): the deadline ends the wait.
      const env = {
        DATABASE_URL: database.url,
        REQUEST_TIMEOUT_SECONDS: "1",
        DATABASE_CONNECT_TIMEOUT_SECONDS: "0.9",
        DATABASE_STATEMENT_TIMEOUT_SECONDS: "3"
      }
      const key = await createKeyWithCommand(env, "locked buckets")
      const server = await startServer({ ...env, LOG_LEVEL: "info" })
      const locker = new pg.Client({ connectionString: database.url })
      await locker.connect()
      try {
        await locker.query("BEGIN")
        await locker.query("LOCK TABLE rate_limit_buckets IN ACCESS EXCLUSIVE MODE")
        const response = await fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
        expect([response.status, response.headers.get("retry-after"), (await response.json()).code]).toEqual([
          503,
          "1",
          "database_unavailable"
        ])
        const warned = () => server.logs().includes(`The database did not answer within the request's deadline, 1s`)
        await waitFor(warned, { what: "the database's warning on the deadline logged", timeout: 1000 })
      } finally {
        await locker.end()
        await server.stop()
      }
    },
    30_000
  )
})
