import { Context } from "effect"
import { ServiceUnavailable } from "../Domain/ApiError.js"

/**
 * Whether this instance has begun to stop: from then on its readiness fails whatever the database
 * says, so that a load balancer takes it out while it still serves. The stop's owner
 * (`Http/InFlightRequests.ts`) provides it.
 */
export class Stopping extends Context.Service<Stopping, { readonly begun: () => boolean }>()("petstore/Stopping") {}

export const shuttingDown = new ServiceUnavailable({
  code: "shutting_down",
  message: "The instance is shutting down; retry",
  status: 503
})
