import { Effect } from "effect"
import { retryAfterHeader, ServiceUnavailable } from "../Domain/ApiError.js"
import { DatabaseUnavailable } from "../Domain/DatabaseUnavailable.js"
import { CurrentRequest, noteResponseHeaders } from "./CurrentRequest.js"
import { errorResponse } from "./ErrorResponse.js"

const unavailable = {
  database_unavailable: new ServiceUnavailable({
    code: "database_unavailable",
    message: "The database cannot serve this request now; retry",
    status: 503
  }),
  database_read_only: new ServiceUnavailable({
    code: "database_read_only",
    message:
      "The database is read-only (a standby, or writes turned off): reads are served; retry the create after Retry-After",
    status: 503
  })
} as const

/** The warning a request answered `database_unavailable` (or `database_read_only`) is logged with: its id, and why. */
export const warnUnavailable = (requestId: string | undefined, reason: string, readOnly = false) =>
  Effect.logWarning(readOnly ? "database read-only" : "database unavailable").pipe(
    Effect.annotateLogs({ requestId, reason })
  )

/** `database_unavailable` answered outside an endpoint: a defect of the SQL layer, the deadline. */
export const databaseUnavailableResponse = errorResponse(
  unavailable.database_unavailable,
  retryAfterHeader("database_unavailable")
)

/**
 * `self`, with a store that cannot serve now answered 503 with `Retry-After` (`database_read_only` for a write refused
 * as read-only), so a client can tell an outage from a bug; logged with the database's words.
 */
export const orUnavailable = <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.catchIf(self, (error) => error instanceof DatabaseUnavailable, (error) => {
    const code = error.reason === "read_only" ? "database_read_only" : "database_unavailable"
    return CurrentRequest.use((current) =>
      warnUnavailable(current?.id, error.message, code === "database_read_only").pipe(
        Effect.andThen(noteResponseHeaders(retryAfterHeader(code))),
        Effect.andThen(Effect.fail(unavailable[code]))
      )
    )
  })

/** `self` counted as a wait on the database: a deadline passing meanwhile answers `database_unavailable`. */
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
