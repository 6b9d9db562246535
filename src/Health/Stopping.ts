import { Context } from "effect"
import { ServiceUnavailable } from "../Domain/ApiError.js"

/** Whether this instance has begun to stop, so readiness fails while it still serves (`Http/InFlightRequests.ts`). */
export class Stopping extends Context.Service<Stopping, { readonly begun: () => boolean }>()("petstore/Stopping") {}

export const shuttingDown = new ServiceUnavailable({
  code: "shutting_down",
  message: "The instance is shutting down; retry",
  status: 503
})
