import { HttpServerRequest } from "@effect/platform"
import { Effect, type Tracer } from "effect"
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
 * Each request's record, kept beside the request (which the platform puts in the request's
 * context) rather than in the fiber's context, which costs measurably more to write per request.
 * Measured by `bun scripts/bench/request-context.ts` (four runs on a
 * loaded 2-core machine): the `WeakMap` adds under 1 µs a request, the fiber's context written in
 * place about 4 µs, `Effect.provideService` about 11 µs. Entries go with their requests.
 */
const records = new WeakMap<HttpServerRequest.HttpServerRequest, RequestState>()

/** The record of a request as it enters; the server middleware makes it, once per request. */
export const enterRequest = (
  request: HttpServerRequest.HttpServerRequest,
  clientAddressOf: (request: HttpServerRequest.HttpServerRequest) => ClientAddress
): RequestState => {
  const state = new RequestState(request, requestIdFor(request), performance.now(), clientAddressOf)
  records.set(request, state)
  return state
}

/** The record of the request being served; a defect outside the server middleware, a service put together wrongly. */
export const currentRequest: Effect.Effect<RequestState, never, HttpServerRequest.HttpServerRequest> = Effect.flatMap(
  HttpServerRequest.HttpServerRequest,
  (request) => {
    const state = records.get(request)
    return state === undefined ? Effect.dieMessage("a request served outside the server middleware") : Effect.succeed(state)
  }
)
