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
import { isCanonicalPath, makeAllowedMethods, pathOf } from "./Routes.js"

/** The response of an error: its wire body (by its tag) under its own status. */
export const errorResponse = (error: ApiError, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson(
    Schema.encodeSync(errorBodies[error._tag] as Schema.Schema<ApiError, unknown>)(error),
    { status: error.status, headers }
  )

/** A response answered before the API saw the request, with the request's id. */
export const withRequestId = (response: HttpServerResponse.HttpServerResponse) => (state: RequestState) =>
  HttpServerResponse.setHeader(response, "x-request-id", state.id)

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

const routeNotFound = (path: string) =>
  errorResponse(new NotFound({ code: "route_not_found", message: `path: no route ${excerpt(path)}`, status: 404 }))

const isApiError = (error: unknown): error is ApiError =>
  Predicate.hasProperty(error, "_tag") && Predicate.hasProperty(errorBodies, error._tag as string) &&
  Predicate.hasProperty(error, "status")

/** RFC 6750: a 401 names the realm, and the error when a token was sent. */
const challenge = (error: ApiError): Record<string, string> =>
  error._tag !== "Unauthorized"
    ? {}
    : {
      "www-authenticate": error.code === "missing_api_key"
        ? `Bearer realm="petstore"`
        : `Bearer realm="petstore", error="invalid_token"`
    }

/**
 * A path spelled otherwise than a route declares it is 404 before the router sees it. Every
 * response leaving the API carries the request's `X-Request-Id`, `Cache-Control: no-store`
 * and `X-Content-Type-Options: nosniff`, and every failure becomes the interface's Error body: the
 * errors the endpoints declare, the platform's decode errors (HttpApi would answer its own
 * `HttpApiDecodeError` body), unknown routes and methods (the router's failure, no error of the
 * API), a database that cannot serve now (503 with `Retry-After`), and unexpected failures
 * (logged, never shown). Declared errors are encoded here by their own wire schema rather than
 * left to HttpApi's encoding of the union of all of them: that costs 26 to 52 µs more CPU per 401
 * and 70 to 90 µs more per 404 (13 to 33%), measured in process by `bun
 * scripts/bench/request-path.ts --in-memory --metrics` in both orders on a loaded 2-core machine,
 * and the headers above would then have to be set outside HttpApi's app.
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
          if (isApiError(error)) return errorResponse(error, challenge(error))
          if (error instanceof HttpApiDecodeError) {
            return errorResponse(
              new BadRequest({ code: "invalid_parameter", message: describeIssues(error.issues, "request"), status: 400 })
            )
          }
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
      withCurrentRequest((state) => {
        const withHeaders = (response: HttpServerResponse.HttpServerResponse) =>
          HttpServerResponse.setHeaders(response, {
            "x-request-id": state.id,
            // Answers are about one caller at one moment: never cached, never sniffed as another type.
            // Only the docs page and the document set their own (`Http/Docs.ts`).
            "cache-control": response.headers["cache-control"] ?? "no-store",
            "x-content-type-options": "nosniff",
            ...state.responseHeaders
          })
        const { url } = state.request
        if (!isCanonicalPath(url)) {
          return Effect.succeed(withHeaders(routeNotFound(pathOf(url))))
        }
        return Effect.matchCauseEffect(app, {
          onSuccess: (response) => Effect.succeed(withHeaders(response)),
          onFailure: (cause) => Effect.map(fromCause(cause, state), withHeaders)
        })
      })
  })
)
