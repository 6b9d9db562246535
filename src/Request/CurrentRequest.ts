import { Context, Effect, type Tracer } from "effect"
import type { HttpRouter, HttpServerRequest } from "effect/http"
import type { ClientAddress } from "./ClientAddress.js"

const acceptableRequestId = /^[\w.:-]{1,128}$/

/** What the service knows of a request while serving it: made where it enters, read below via `CurrentRequest`. */
export class RequestRecord {
  /** The request's `X-Request-Id`, put on its response and in its log lines. */
  readonly id: string
  private client: ClientAddress | undefined = undefined
  /** The route the router matched (`RouteNoted`, `Http/Server.ts`), for the request's labels; none until it has. */
  route: HttpRouter.Route<any, any> | undefined = undefined
  /** The request's store calls running now (`waitingOnDatabase`), read by its deadline. */
  databaseWaits = 0
  /** Headers noted for its response (`noteResponseHeaders`), a later one winning; a noted object is never changed. */
  noted: Readonly<Record<string, string>> | undefined = undefined

  constructor(
    readonly request: HttpServerRequest.HttpServerRequest,
    private readonly clientAddressOf: (request: HttpServerRequest.HttpServerRequest) => ClientAddress,
    /** `performance.now()` when the request arrived. */
    readonly startedAt: number,
    /** The request's server span, when it is sampled: its ids go in the log line. */
    readonly trace: Tracer.Span | undefined
  ) {
    // The caller's `X-Request-Id` when it sent a sane one, else a new one.
    const incoming = request.headers["x-request-id"]
    this.id = incoming !== undefined && acceptableRequestId.test(incoming) ? incoming : crypto.randomUUID()
  }

  /** Who sent the request (`ClientAddress.ts`), read once, when first asked. */
  get clientAddress(): ClientAddress {
    return this.client ??= this.clientAddressOf(this.request)
  }
}

/** The request being served, provided by the server middleware; none outside a request. */
export const CurrentRequest = Context.Reference<RequestRecord | undefined>("petstore/CurrentRequest", {
  defaultValue: () => undefined
})

/** Headers for the response, success or failure: written with every response's own (`Http/ApiResponses.ts`). */
export const noteResponseHeaders = (headers: Readonly<Record<string, string>>): Effect.Effect<void> =>
  CurrentRequest.useSync((current) => {
    if (current !== undefined) current.noted = current.noted === undefined ? headers : { ...current.noted, ...headers }
  })
