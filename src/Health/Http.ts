import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { PetStoreApi } from "../Api.js"
import { ServiceUnavailable } from "../Domain/ApiError.js"
import { PetRepository } from "../Pets/PetRepository.js"

export const HealthHttpLive = HttpApiBuilder.group(PetStoreApi, "health", (handlers) =>
  Effect.gen(function*() {
    const pets = yield* PetRepository
    return handlers
      .handle("livez", () => Effect.succeed({ status: "ok" as const }))
      .handle("readyz", () =>
        Effect.flatMap(pets.isReady, (ready) =>
          ready
            ? Effect.succeed({ status: "ok" as const })
            : Effect.fail(
              new ServiceUnavailable({ code: "database_unavailable", message: "database: does not answer", status: 503 })
            )))
  }))
