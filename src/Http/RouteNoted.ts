import { Context, Effect } from "effect"
import { HttpRouter, type HttpServerResponse } from "effect/http"
import { CurrentRequest } from "../Request/CurrentRequest.js"
import { InFlightRequests } from "./InFlightRequests.js"

/**
 * Registered with every route: the route the router matched (its `RouteContext`) noted on the
 * request's record, which its metrics, log line and server span are labelled by once it is
 * answered (`RequestObserver.ts`); then, once the stop has closed the listener, the refusal.
 */
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
