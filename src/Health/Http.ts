import { Effect, Fiber } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { PetStoreApi } from "../Api.js"
import { ServiceUnavailable } from "../Domain/ApiError.js"
import { PetRepository } from "../Pets/PetRepository.js"

/**
 * A load balancer's check must get an answer within a second, whatever the database does: a check
 * still waiting after this long counts as not ready (and finishes in the background). The quarter
 * second left covers the answer's way out on a loaded machine.
 */
const readinessTimeout = "750 millis"

const readiness = (isReady: Effect.Effect<boolean>) =>
  Effect.flatMap(Effect.forkDetach(isReady), (check) =>
    Effect.timeoutOrElse(Fiber.join(check), { duration: readinessTimeout, orElse: () => Effect.succeed(false) }))

const ok = { status: "ok" } as const

const notReady = new ServiceUnavailable({ code: "database_unavailable", message: "database: does not answer", status: 503 })

export const HealthHttpLive = HttpApiBuilder.group(PetStoreApi, "health", (handlers) =>
  Effect.gen(function*() {
    const pets = yield* PetRepository
    return handlers
      .handle("livez", () => Effect.succeed(ok))
      .handle("readyz", () =>
        Effect.flatMap(readiness(pets.isReady), (ready) => ready ? Effect.succeed(ok) : Effect.fail(notReady)))
  }))
