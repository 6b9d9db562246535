import { Effect, Layer } from "effect"
import { petsCreatedCounter } from "../Observability/Metrics.js"
import { ObservabilityConfig } from "../Observability/ObservabilityConfig.js"
import { inSampledSpan } from "../Observability/Tracing.js"
import { waitingOnDatabase } from "../Request/Unavailable.js"
import { PetRepository } from "./PetRepository.js"

/** Calls as the request's waits on its database (a deadline passing in one is its fault), in spans; creates counted. */
export const ObservedPetRepository = Layer.effect(
  PetRepository,
  Effect.gen(function*() {
    const { metrics, tracing } = yield* ObservabilityConfig
    const stored = yield* PetRepository
    const countCreated = metrics._tag === "None" ? undefined : petsCreatedCounter()
    const inSpan = (name: string) =>
      tracing._tag === "None"
        ? <A, E, R>(effect: Effect.Effect<A, E, R>) => effect
        : inSampledSpan(`PetRepository.${name}`, { "code.function.name": `PetRepository.${name}` })
    const observed = <A extends Array<any>, B, E, R>(
      name: string,
      call: (...args: A) => Effect.Effect<B, E, R>,
      count?: () => void
    ) => {
      const inCallSpan = inSpan(name)
      return (...args: A) => {
        const waited = waitingOnDatabase(call(...args))
        return inCallSpan(count === undefined ? waited : Effect.map(waited, (created) => (count(), created)))
      }
    }
    return PetRepository.of({
      create: observed("create", stored.create, countCreated),
      createOnce: observed("createOnce", stored.createOnce, countCreated),
      findById: observed("findById", stored.findById),
      list: observed("list", stored.list),
      reserve: observed("reserve", stored.reserve),
      release: observed("release", stored.release),
      // Run by /readyz's probe, as the service's own: no request's deadline waits on it.
      readiness: inSpan("readiness")(stored.readiness)
    })
  })
)
