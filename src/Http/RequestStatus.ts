import { Cause, Context, Exit } from "effect"
import { HttpServerError, type HttpServerResponse } from "effect/http"

/** nginx's status for a request whose client closed the connection before the answer. */
const clientClosedRequest = 499

/** Whether a request ended because its client went away (the server marks that interruption). */
const isClientAbort = (cause: Cause.Cause<unknown>): boolean =>
  cause.reasons.some((reason) =>
    Cause.isInterruptReason(reason) &&
    Context.getOrUndefined(Cause.reasonAnnotations(reason), HttpServerError.ClientAbort) === true
  )

/** The status a request ended with: its response's, 499 when its client went away (never a server error), else 500. */
export const statusOf = (exit: Exit.Exit<HttpServerResponse.HttpServerResponse, unknown>): number =>
  Exit.isSuccess(exit) ? exit.value.status : isClientAbort(exit.cause) ? clientClosedRequest : 500
