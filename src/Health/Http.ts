import { Effect, Fiber } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { PetStoreApi } from "../Api.js"
import { ServiceUnavailable } from "../Domain/ApiError.js"
import { PetRepository, type Readiness } from "../Pets/PetRepository.js"
import { shuttingDown, Stopping } from "./Stopping.js"

/**
 * A load balancer's check must get an answer within a second, whatever the database does: a check
 * still waiting after this long counts as not ready (and finishes in the background). The quarter
 * second left covers the answer's way out on a loaded machine.
 */
const readinessTimeout = "750 millis"

const readiness = (check: Effect.Effect<Readiness>) =>
  Effect.flatMap(Effect.forkDetach(check), (fiber) =>
    Effect.timeoutOrElse(Fiber.join(fiber), { duration: readinessTimeout, orElse: () => Effect.succeed<Readiness>("unavailable") }))

const ok = { status: "ok" } as const

const notReady = {
  unavailable: new ServiceUnavailable({ code: "database_unavailable", message: "database: does not answer", status: 503 }),
  // Reads would be served, but a load balancer should send this instance's writes nowhere.
  read_only: new ServiceUnavailable({
    code: "database_read_only",
    message: "database: is read-only (a standby, or default_transaction_read_only); creates are refused",
    status: 503
  })
} as const

export const HealthHttpLive = HttpApiBuilder.group(PetStoreApi, "health", (handlers) =>
  Effect.gen(function*() {
    const pets = yield* PetRepository
    const stopping = yield* Stopping
    return handlers
      .handle("livez", () => Effect.succeed(ok))
      .handle("readyz", () =>
        stopping.begun()
          ? Effect.fail(shuttingDown)
          : Effect.flatMap(readiness(pets.readiness), (state) => state === "ready" ? Effect.succeed(ok) : Effect.fail(notReady[state])))
  }))
