import { Effect, Predicate } from "effect"
import type { HttpServerRequest } from "effect/http"
import { ServiceUnavailable } from "../Domain/ApiError.js"
import { CurrentRequest, noteResponseHeaders } from "./CurrentRequest.js"

const databaseUnavailable = new ServiceUnavailable({
  code: "database_unavailable",
  message: "The database cannot serve this request now; retry",
  status: 503
})

const retryAfter = { "retry-after": "1" }

const databaseReadOnly = new ServiceUnavailable({
  code: "database_read_only",
  message: "The database is read-only (a standby, or writes turned off): reads are served; retry the create after Retry-After",
  status: 503
})

/** A read-only database is a failover under way or an operator's choice: seconds to minutes. */
const readOnlyRetryAfter = { "retry-after": "5" }

/**
 * A store that cannot serve now (a `DatabaseUnavailable`: away, hung, locked, read-only or full):
 * 503 `database_unavailable` with `Retry-After`, so a client can tell an outage from a bug, or
 * `database_read_only` when it refused a write as read-only; and a warning in the log naming the
 * request and the database's own words.
 */
export const answerUnavailable = (
  error: Pick<Unavailability, "message" | "reason">
): Effect.Effect<never, ServiceUnavailable, HttpServerRequest.HttpServerRequest> =>
  CurrentRequest.use((current) => {
    const readOnly = error.reason === "read_only"
    return Effect.logWarning(readOnly ? "database read-only" : "database unavailable").pipe(
      Effect.annotateLogs({ requestId: current?.id, reason: error.message }),
      Effect.andThen(noteResponseHeaders(readOnly ? readOnlyRetryAfter : retryAfter)),
      Effect.andThen(Effect.fail(readOnly ? databaseReadOnly : databaseUnavailable))
    )
  })

/** What a store fails with when its database cannot serve now (`Sql/DatabaseErrors.ts`). */
interface Unavailability {
  readonly _tag: "DatabaseUnavailable"
  readonly reason: string
  readonly message: string
}

/** `self`, with a store that cannot serve now answered as `answerUnavailable` says. */
export const orUnavailable = <A, E, R>(
  self: Effect.Effect<A, E, R>
): Effect.Effect<A, Exclude<E, Unavailability> | ServiceUnavailable, R | HttpServerRequest.HttpServerRequest> =>
  Effect.catch(self, (error): Effect.Effect<
    never,
    Exclude<E, Unavailability> | ServiceUnavailable,
    HttpServerRequest.HttpServerRequest
  > =>
    Predicate.isTagged(error, "DatabaseUnavailable")
      ? answerUnavailable(error as unknown as Unavailability)
      : Effect.fail(error as Exclude<E, Unavailability>))
