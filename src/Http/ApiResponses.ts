import { HttpApi, HttpApiBuilder, type HttpApp, HttpServerResponse } from "@effect/platform"
import { HttpApiDecodeError } from "@effect/platform/HttpApiError"
import { RouteNotFound } from "@effect/platform/HttpServerError"
import { Cause, Effect, Option, Schema, SchemaAST as AST } from "effect"
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

/**
 * Every error HttpApi's own encoding can write: those the API declares, on itself, its groups and
 * endpoints (the authentication and deprecation middlewares' included), as HttpApi collects them.
 */
const isDeclared: (error: unknown) => boolean = (() => {
  const members: Array<AST.AST> = []
  const add = ({ ast }: { readonly ast: AST.AST }) => members.push(...(AST.isUnion(ast) ? ast.types : [ast]))
  add(PetStoreApi.errorSchema)
  HttpApi.reflect(PetStoreApi, {
    onGroup: ({ group }) => add(group.errorSchema),
    onEndpoint: ({ endpoint }) => add(endpoint.errorSchema)
  })
  return Schema.is(Schema.make(AST.Union.make(members)))
})()

/**
 * Failures become the interface's Error body. The errors the API declares are left to HttpApi,
 * which encodes them by their wire schema (`Domain/ApiError.ts`) under their status; written here
 * is only what HttpApi cannot write so: its own decode error (HttpApi would answer its
 * `HttpApiDecodeError` body, not the interface's), unknown routes and methods (the router's
 * failure, before any endpoint, with `Allow`), a database that cannot serve now (a defect of the
 * SQL layer, answered 503 with `Retry-After`), and unexpected failures (logged, never shown).
 * The headers every response carries are set around HttpApi's app, after its encoding
 * (`Http/Server.ts`, `Http/ResponseHeaders.ts`).
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
          if (isDeclared(error)) return yield* Effect.failCause(cause as Cause.Cause<never>)
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
      Effect.catchAllCause(app, (cause) => withCurrentRequest((state) => fromCause(cause, state)))
  })
)
