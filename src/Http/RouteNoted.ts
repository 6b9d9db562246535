import { Context, Effect } from "effect"
import { HttpRouter, type HttpServerResponse } from "effect/http"
import { CurrentRequest } from "../Request/CurrentRequest.js"
import { InFlightRequests } from "./InFlightRequests.js"

/** On every route: the matched route noted on the request's record for its labels, then the stop's refusal. */
export const RouteNoted = HttpRouter.middleware(
  Effect.map(
    Effect.service(InFlightRequests),
    ({ refusingWhenClosed }) => <E, R>(handler: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) => {
      const refusing = refusingWhenClosed(handler)
      return Effect.withFiber((fiber) => {
        const current = fiber.getRef(CurrentRequest)
        if (current !== undefined) current.route = Context.getUnsafe(fiber.context, HttpRouter.RouteContext).route
        return refusing
      })
    }
  )
).layer
