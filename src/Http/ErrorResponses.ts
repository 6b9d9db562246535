import { HttpApiBuilder, type HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { HttpApiDecodeError } from "@effect/platform/HttpApiError"
import { RouteNotFound } from "@effect/platform/HttpServerError"
import { Cause, Effect, Option, Schema } from "effect"
import { PetStoreApi } from "../Api.js"
import {
  BadRequest,
  BadRequestBody,
  InternalError,
  InternalErrorBody,
  MethodNotAllowed,
  MethodNotAllowedBody,
  NotFound,
  NotFoundBody
} from "../Domain/ApiError.js"
import { describeIssues } from "./ParseIssues.js"
import { requestIdOf } from "./RequestLog.js"
import { makeAllowedMethods } from "./Routes.js"

const respond = <A, I>(schema: Schema.Schema<A, I>, status: number, error: A, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson(Schema.encodeSync(schema)(error), { status, headers })

const internalError = respond(
  InternalErrorBody,
  500,
  new InternalError({ code: "internal_error", message: "The service failed unexpectedly; the request id names it in the log", status: 500 })
)

/**
 * Turns every failure under the API into the interface's Error body: the platform's decode errors,
 * unknown routes and methods, and unexpected failures (logged, never shown). The errors the
 * endpoints declare pass through to the platform, which encodes them.
 */
export const ErrorResponses = HttpApiBuilder.middleware(
  PetStoreApi,
  Effect.sync(() => {
    const allowedMethods = makeAllowedMethods()
    return (app: HttpApp.Default): HttpApp.Default =>
      Effect.catchAllCause(app, (cause: Cause.Cause<unknown>) =>
        Effect.gen(function*() {
          // The platform encodes the errors the endpoints declare; the app's type does not list them.
          const passThrough = Effect.failCause(cause as Cause.Cause<never>)
          if (Cause.isInterruptedOnly(cause)) return yield* passThrough
          const failure = Cause.failureOption(cause)
          if (Option.isSome(failure)) {
            const error = failure.value
            if (error instanceof HttpApiDecodeError) {
              return respond(
                BadRequestBody,
                400,
                new BadRequest({ code: "invalid_parameter", message: describeIssues(error.issues, "request"), status: 400 })
              )
            }
            if (error instanceof RouteNotFound) {
              const request = yield* HttpServerRequest.HttpServerRequest
              const path = new URL(request.url, "http://localhost").pathname
              const allowed = allowedMethods(path)
              return allowed.length === 0
                ? respond(
                  NotFoundBody,
                  404,
                  new NotFound({ code: "route_not_found", message: `path: no route ${path}`, status: 404 })
                )
                : respond(
                  MethodNotAllowedBody,
                  405,
                  new MethodNotAllowed({
                    code: "method_not_allowed",
                    message: `method: ${request.method} is not allowed on ${path}; use ${allowed.join(", ")}`,
                    status: 405
                  }),
                  { allow: allowed.join(", ") }
                )
            }
            if (!Cause.isDie(cause)) return yield* passThrough
          }
          const request = yield* HttpServerRequest.HttpServerRequest
          yield* Effect.logError("request failed", cause).pipe(Effect.annotateLogs("requestId", requestIdOf(request)))
          return internalError
        }))
  })
)
