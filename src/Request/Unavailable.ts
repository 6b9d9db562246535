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

/**
 * A store that cannot serve now (a `DatabaseUnavailable`: away, hung, locked, read-only or full):
 * 503 `database_unavailable` with `Retry-After`, so a client can tell an outage from a bug, and a
 * warning in the log naming the request and the database's own words.
 */
export const answerUnavailable = (
  error: { readonly message: string }
): Effect.Effect<never, ServiceUnavailable, HttpServerRequest.HttpServerRequest> =>
  CurrentRequest.use((current) =>
    Effect.logWarning("database unavailable").pipe(
      Effect.annotateLogs({ requestId: current?.id, reason: error.message }),
      Effect.andThen(noteResponseHeaders(retryAfter)),
      Effect.andThen(Effect.fail(databaseUnavailable))
    ))

/** What a store fails with when its database cannot serve now (`Sql/DatabaseErrors.ts`). */
interface Unavailability {
  readonly _tag: "DatabaseUnavailable"
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
