import { HttpApiBuilder, type HttpApp, HttpServerResponse } from "@effect/platform"
import { HttpApiDecodeError } from "@effect/platform/HttpApiError"
import { RouteNotFound } from "@effect/platform/HttpServerError"
import { Cause, Effect, Option, Predicate, Schema } from "effect"
import { PetStoreApi } from "../Api.js"
import {
  type ApiError,
  BadRequest,
  errorBodies,
  InternalError,
  MethodNotAllowed,
  NotFound,
  ServiceUnavailable
} from "../Domain/ApiError.js"
import { summarizeCause } from "../Observability/CauseSummary.js"
import { describeIssues, excerpt } from "../Request/ParseIssues.js"
import { type RequestState, withCurrentRequest } from "../Request/CurrentRequest.js"
import { databaseUnavailable } from "../Sql/DatabaseErrors.js"
import { withResponseHeaders } from "./ResponseHeaders.js"
import { makeAllowedMethods, pathOf } from "./Routes.js"

/** The response of an error: its wire body (by its tag) under its own status. */
export const errorResponse = (error: ApiError, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson(
    Schema.encodeSync(errorBodies[error._tag] as Schema.Schema<ApiError, unknown>)(error),
    { status: error.status, headers }
  )

/**
 * An answer the server middleware gives itself (the deadline's, a draining server's): the server
 * sends it as it is, so it gets here the headers every response leaves with.
 */
export const answeredEarly = (response: HttpServerResponse.HttpServerResponse) =>
  withCurrentRequest((state) => Effect.succeed(withResponseHeaders(state)(response)))

const internalError = errorResponse(
  new InternalError({ code: "internal_error", message: "The service failed unexpectedly; the request id names it in the log", status: 500 })
)

const databaseUnavailableResponse = errorResponse(
  new ServiceUnavailable({
    code: "database_unavailable",
    message: "The database cannot serve this request now; retry",
    status: 503
  }),
  { "retry-after": "1" }
)

/** A path no route declares (or one spelled otherwise than declared): 404 `route_not_found`. */
export const routeNotFound = (path: string) =>
  errorResponse(new NotFound({ code: "route_not_found", message: `path: no route ${excerpt(path)}`, status: 404 }))

const isApiError = (error: unknown): error is ApiError =>
  Predicate.hasProperty(error, "_tag") && Predicate.hasProperty(errorBodies, error._tag as string) &&
  Predicate.hasProperty(error, "status")

/**
 * Failures become the interface's Error body: the errors the endpoints declare, the platform's
 * decode errors (HttpApi would answer its own `HttpApiDecodeError` body, not the interface's),
 * unknown routes and methods (the router's failure, before any endpoint, with `Allow`), a
 * database that cannot serve now (a defect of the SQL layer, answered 503 with `Retry-After`),
 * and unexpected failures (logged, never shown). The headers every response carries are set
 * around HttpApi's app (`Http/Server.ts`, `Http/ResponseHeaders.ts`).
 *
 * Declared errors are written here by their own wire schema, the one the API declares them with
 * (`errorBodies`), rather than left to fail through to HttpApi's encoding of them: that encoding
 * (the failure squashed, the API's context provided, the union of every error schema run as an
 * effect) costs about 11 µs more CPU per 401 (51 µs before), which took the 401 workload to
 * 0.84× of this layout's throughput on SQLite and 0.82× on PostgreSQL, and to 0.94× of 8069bce's
 * on SQLite, below the 0.95× the service keeps (`bun scripts/bench.ts --ab`, 6 rounds of 4 s,
 * 24 November 2026; docs/benchmarks.md). Everything else of a declared error (its schema, its
 * status, the OpenAPI document) is HttpApi's.
 */
export const ApiResponses = HttpApiBuilder.middleware(
  PetStoreApi,
  Effect.sync(() => {
    const allowedMethods = makeAllowedMethods()
    const fromCause = (cause: Cause.Cause<unknown>, { id: requestId, request }: RequestState) =>
      Effect.gen(function*() {
        if (Cause.isInterruptedOnly(cause)) return yield* Effect.failCause(cause as Cause.Cause<never>)
        const failure = Cause.failureOption(cause)
        if (Option.isSome(failure) && !Cause.isDie(cause)) {
          const error = failure.value
          if (error instanceof HttpApiDecodeError) {
            return errorResponse(
              new BadRequest({ code: "invalid_parameter", message: describeIssues(error.issues, "request"), status: 400 })
            )
          }
          if (isApiError(error)) return errorResponse(error)
          if (error instanceof RouteNotFound) {
            const path = pathOf(request.url)
            const allowed = allowedMethods(path)
            return allowed.length === 0
              ? routeNotFound(path)
              : errorResponse(
                new MethodNotAllowed({
                  code: "method_not_allowed",
                  message: `method: ${excerpt(request.method)} is not allowed on ${path}; use ${allowed.join(", ")}`,
                  status: 405
                }),
                { allow: allowed.join(", ") }
              )
          }
        }
        const unavailable = databaseUnavailable(cause)
        if (Option.isSome(unavailable)) {
          yield* Effect.logWarning("database unavailable").pipe(
            Effect.annotateLogs({ requestId, reason: unavailable.value })
          )
          return databaseUnavailableResponse
        }
        yield* Effect.logError("request failed").pipe(
          Effect.annotateLogs({ requestId, error: summarizeCause(cause) })
        )
        return internalError
      })
    return (app: HttpApp.Default): HttpApp.Default =>
      Effect.catchAllCause(app, (cause) => {
        // A declared error (a 401, a 404) in the same step: the most frequent failures.
        const declared = cause._tag === "Fail" && isApiError(cause.error) ? cause.error : undefined
        return declared !== undefined
          ? Effect.succeed(errorResponse(declared))
          : withCurrentRequest((state) => fromCause(cause, state))
      })
  })
)
