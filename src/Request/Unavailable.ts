import { Effect } from "effect"
import type { HttpServerRequest } from "effect/http"
import { retryAfterHeader, ServiceUnavailable } from "../Domain/ApiError.js"
import { DatabaseUnavailable } from "../Domain/DatabaseUnavailable.js"
import { CurrentRequest, noteResponseHeaders } from "./CurrentRequest.js"
import { errorResponse } from "./ErrorResponse.js"

const databaseUnavailable = new ServiceUnavailable({
  code: "database_unavailable",
  message: "The database cannot serve this request now; retry",
  status: 503
})

const retryAfter = retryAfterHeader("database_unavailable")

/**
 * `database_unavailable` as a response, for the answers given outside an endpoint: a defect of the
 * SQL layer (`Http/ApiResponses.ts`), a deadline that passed while the request waited on its
 * database (`Http/RequestDeadline.ts`).
 */
export const databaseUnavailableResponse = errorResponse(databaseUnavailable, retryAfter)

/** The warning a request answered `database_unavailable` is logged with: its id, and why. */
export const warnUnavailable = (requestId: string | undefined, reason: string) =>
  Effect.logWarning("database unavailable").pipe(Effect.annotateLogs({ requestId, reason }))

const databaseReadOnly = new ServiceUnavailable({
  code: "database_read_only",
  message:
    "The database is read-only (a standby, or writes turned off): reads are served; retry the create after Retry-After",
  status: 503
})

const readOnlyRetryAfter = retryAfterHeader("database_read_only")

/**
 * A store that cannot serve now (a `DatabaseUnavailable`: away, hung, locked, read-only or full):
 * 503 `database_unavailable` with `Retry-After`, so a client can tell an outage from a bug, or
 * `database_read_only` when it refused a write as read-only; and a warning in the log naming the
 * request and the database's own words.
 */
export const answerUnavailable = (
  error: Pick<DatabaseUnavailable, "message" | "reason">
): Effect.Effect<never, ServiceUnavailable, HttpServerRequest.HttpServerRequest> =>
  CurrentRequest.use((current) => {
    const readOnly = error.reason === "read_only"
    return Effect.logWarning(readOnly ? "database read-only" : "database unavailable").pipe(
      Effect.annotateLogs({ requestId: current?.id, reason: error.message }),
      Effect.andThen(noteResponseHeaders(readOnly ? readOnlyRetryAfter : retryAfter)),
      Effect.andThen(Effect.fail(readOnly ? databaseReadOnly : databaseUnavailable))
    )
  })

/** `self`, with a store that cannot serve now answered as `answerUnavailable` says. */
export const orUnavailable = <A, E, R>(
  self: Effect.Effect<A, E, R>
): Effect.Effect<A, Exclude<E, DatabaseUnavailable> | ServiceUnavailable, R | HttpServerRequest.HttpServerRequest> =>
  Effect.catch(self, (error): Effect.Effect<
    never,
    Exclude<E, DatabaseUnavailable> | ServiceUnavailable,
    HttpServerRequest.HttpServerRequest
  > =>
    error instanceof DatabaseUnavailable
      ? answerUnavailable(error)
      : Effect.fail(error as Exclude<E, DatabaseUnavailable>))

/**
 * `self`, a call of the current request to a store, counted as a wait on the database while it
 * runs: a deadline that passes meanwhile is then the database's fault, and answered as its other
 * faults are, `database_unavailable` (`Http/RequestDeadline.ts`).
 */
export const waitingOnDatabase = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiber((fiber) => {
    const current = fiber.getRef(CurrentRequest)
    if (current === undefined) return self
    current.databaseWaits++
    // A plain exit hook: no finalizer effect to build and run for each store call.
    return Effect.onExitPrimitive(self, () => {
      current.databaseWaits--
      return undefined
    })
  })
