import type { HttpServerResponse } from "@effect/platform"
import { clientAbortFiberId } from "@effect/platform/HttpServerError"
import { Cause, Exit, HashSet } from "effect"

/** nginx's status for a request whose client closed the connection before the answer. */
export const clientClosedRequest = 499

/**
 * The status a request ended with: its response's, 499 when its client went away (during a slowed
 * 401 or before its body was complete: the client's doing, so never counted as a server error),
 * else 500.
 */
export const statusOf = (exit: Exit.Exit<HttpServerResponse.HttpServerResponse, unknown>): number =>
  Exit.isSuccess(exit)
    ? exit.value.status
    : HashSet.has(Cause.interruptors(exit.cause), clientAbortFiberId)
    ? clientClosedRequest
    : 500
