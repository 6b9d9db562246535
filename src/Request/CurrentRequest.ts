import { HttpServerRequest } from "@effect/platform"
import { Context, Effect, FiberRef, type Tracer } from "effect"
import type { ClientAddress } from "./ClientAddress.js"

const acceptableRequestId = /^[\w.:-]{1,128}$/

/** The caller's `X-Request-Id` when it sent a sane one, else a new one. */
const requestIdFor = (request: HttpServerRequest.HttpServerRequest): string => {
  const incoming = request.headers["x-request-id"]
  return incoming !== undefined && acceptableRequestId.test(incoming) ? incoming : crypto.randomUUID()
}

/**
 * What the service keeps of one request while serving it, in one record: made by the server
 * middleware where the request enters (`Http/Server.ts`, `enterRequest`), read and noted on by
 * every middleware and handler below (`currentRequest`).
 */
export class RequestState {
  /** The server span, when the request's trace is sampled: its ids go in the log line. */
  span: Tracer.Span | undefined = undefined
  /** Headers decided for the response (rate limits, an endpoint's deprecation), errors included. */
  responseHeaders: Record<string, string> | undefined = undefined
  private client: ClientAddress | undefined = undefined

  constructor(
    readonly request: HttpServerRequest.HttpServerRequest,
    /** The request's `X-Request-Id`, put on its response and in its log lines. */
    readonly id: string,
    /** `performance.now()` when the request arrived. */
    readonly startedAt: number,
    private readonly clientAddressOf: (request: HttpServerRequest.HttpServerRequest) => ClientAddress
  ) {}

  /** Who sent the request (`ClientAddress.ts`), read once. */
  get clientAddress(): ClientAddress {
    return this.client ??= this.clientAddressOf(this.request)
  }

  /** Adds headers to the response, whether it succeeds or fails; a later value of a header wins. */
  noteResponseHeaders(headers: Record<string, string>): void {
    this.responseHeaders = this.responseHeaders === undefined ? headers : { ...this.responseHeaders, ...headers }
  }
}

/**
 * Each request's record, carried by the request's fiber (and any it forks): the server
 * middleware sets it in place once, since the fiber is the request's own and ends with it. Set
 * so, it adds 1–2 µs a request, where `Effect.provideService` adds about 6 µs and a service added
 * to the fiber's context in place about 2–3 µs (`bun scripts/bench/request-context.ts`, three runs
 * on a loaded 2-core machine).
 */
const currentRecord = FiberRef.unsafeMake<RequestState | undefined>(undefined)

/**
 * The record of the request the running fiber serves, made as it enters and carried by that fiber
 * while `served` runs; the server middleware calls it, once per request. One step of the fiber
 * (the request read from the fiber's context in the same step): on a request's path each step
 * costs about as much as a SQLite read's own work.
 */
export const enterRequest = <A, E, R>(
  clientAddressOf: (request: HttpServerRequest.HttpServerRequest) => ClientAddress,
  served: (state: RequestState) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R | HttpServerRequest.HttpServerRequest> =>
  Effect.withFiberRuntime((fiber) => {
    const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
    const state = new RequestState(request, requestIdFor(request), performance.now(), clientAddressOf)
    return Effect.zipRight(FiberRef.set(currentRecord, state), served(state))
  })

/**
 * Runs `f` with the record of the request being served, in the same step as reading it (where
 * `Effect.flatMap(currentRequest, f)` takes three); a defect outside the server middleware, a
 * service put together wrongly.
 */
export const withCurrentRequest = <A, E, R>(f: (state: RequestState) => Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime((fiber) => {
    const state = fiber.getFiberRef(currentRecord)
    return state === undefined ? Effect.dieMessage("a request served outside the server middleware") : f(state)
  })

/** The record of the request being served. */
export const currentRequest: Effect.Effect<RequestState> = withCurrentRequest(Effect.succeed)
