import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
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
  Effect.timeoutTo(Effect.disconnect(isReady), { duration: readinessTimeout, onSuccess: (ready) => ready, onTimeout: () => false })

export const HealthHttpLive = HttpApiBuilder.group(PetStoreApi, "health", (handlers) =>
  Effect.gen(function*() {
    const pets = yield* PetRepository
    return handlers
      .handle("livez", () => Effect.succeed({ status: "ok" as const }))
      .handle("readyz", () =>
        Effect.flatMap(readiness(pets.isReady), (ready) =>
          ready
            ? Effect.succeed({ status: "ok" as const })
            : Effect.fail(
              new ServiceUnavailable({ code: "database_unavailable", message: "database: does not answer", status: 503 })
            )))
  }))
