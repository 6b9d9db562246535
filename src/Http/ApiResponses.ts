import { Cause, Effect, Predicate, Result } from "effect"
import { HttpEffect, HttpServerError, HttpServerResponse } from "effect/http"
import { HttpApiMiddleware } from "effect/http-api"
import { SqlError } from "effect/sql"
import { SchemaErrors } from "../Api/SchemaErrors.js"
import type { ApiError } from "../Domain/ApiError.js"
import { BadRequest, errorBodies, InternalError, MethodNotAllowed, NotFound } from "../Domain/ApiError.js"
import { describeIssue, excerpt } from "../Domain/ParseIssues.js"
import { summarizeCause } from "../Observability/CauseSummary.js"
import { CurrentRequest, type RequestRecord } from "../Request/CurrentRequest.js"
import { errorResponse } from "../Request/ErrorResponse.js"
import { databaseUnavailableResponse, warnUnavailable } from "../Request/Unavailable.js"
import { toUnavailable } from "../Sql/DatabaseErrors.js"
import { makeAllowedMethods, pathOf } from "./Routes.js"

/**
 * Every response's headers, whoever wrote it (an endpoint, a failure, the deadline, the stop): `X-Request-Id`, `no-store`
 * unless it set its own, `nosniff`, then those its request noted; in one copy, by one platform pre-response handler a
 * request, not one a note ([benchmarks](../../docs/benchmarks.md#the-librarys-pieces)).
 */
export const withResponseHeaders = <A, E, R>(record: RequestRecord, self: Effect.Effect<A, E, R>) =>
  HttpEffect.withPreResponseHandler(
    self,
    (_request, response) =>
      Effect.succeed(HttpServerResponse.setHeaders(response, {
        "x-request-id": record.id,
        "cache-control": response.headers["cache-control"] ?? "no-store",
        "x-content-type-options": "nosniff",
        ...record.noted
      }))
  )

const internalError = new InternalError({
  code: "internal_error",
  message: "The service failed unexpectedly; the request id names it in the log",
  status: 500
})

export const routeNotFound = (path: string) =>
  errorResponse(new NotFound({ code: "route_not_found", message: `path: no route ${excerpt(path)}`, status: 404 }))

const isApiError = (error: unknown): error is ApiError =>
  Predicate.hasProperty(error, "_tag") && Predicate.hasProperty(errorBodies, error._tag as string) &&
  Predicate.hasProperty(error, "status")

const logFailure = (cause: Cause.Cause<unknown>, requestId: string | undefined) =>
  Effect.logError("request failed").pipe(Effect.annotateLogs({ requestId, error: summarizeCause(cause) }))

/** The Error body of what no endpoint answered: 404, 405 (`Allow`), 503, else 500, logged; not a client gone. */
export const makeFailureAnswers = () => {
  const allowedMethods = makeAllowedMethods()
  return (cause: Cause.Cause<unknown>, record: RequestRecord) => {
    const { request } = record
    if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
    const error = Cause.findErrorOption(cause)
    if (error._tag === "Some") {
      if (HttpServerError.isHttpServerError(error.value) && error.value.reason._tag === "RouteNotFound") {
        const path = pathOf(request.url)
        const allow = allowedMethods(path).join(", ")
        if (allow === "") return Effect.succeed(routeNotFound(path))
        const message = `method: ${excerpt(request.method)} is not allowed on ${path}; use ${allow}`
        return Effect.succeed(
          errorResponse(new MethodNotAllowed({ code: "method_not_allowed", message, status: 405 }), { allow })
        )
      }
      if (isApiError(error.value)) return Effect.succeed(errorResponse(error.value))
    }
    const defect = Result.getOrUndefined(Cause.findDefect(cause))
    const unavailable = SqlError.isSqlError(defect) ? toUnavailable(defect) : undefined
    if (unavailable !== undefined) {
      return Effect.as(warnUnavailable(record.id, unavailable.message), databaseUnavailableResponse)
    }
    return Effect.as(logFailure(cause, record.id), errorResponse(internalError))
  }
}

/** HttpApi's schema failures: 400 naming the parameter or header and its rule; 500 for a response. */
export const SchemaErrorsLive = HttpApiMiddleware.layerSchemaErrorTransform(SchemaErrors, (error) => {
  if (error.kind === "Body" || error.kind === "ResponseHeaders") {
    return CurrentRequest.use((current) =>
      Effect.andThen(logFailure(Cause.fail(error.cause), current?.id), Effect.fail(internalError))
    )
  }
  const code = error.kind === "Headers" ? "invalid_header" : "invalid_parameter"
  const message = describeIssue(error.cause.issue, error.kind === "Payload" ? "body" : "request")
  return Effect.fail(new BadRequest({ code, message, status: 400 }))
})
