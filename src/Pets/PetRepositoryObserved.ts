import { Effect, Layer } from "effect"
import { petsCreatedCounter } from "../Observability/Metrics.js"
import { ObservabilityConfig } from "../Observability/ObservabilityConfig.js"
import { inSampledSpan } from "../Observability/Tracing.js"
import { waitingOnDatabase } from "../Request/Unavailable.js"
import { PetRepository } from "./PetRepository.js"

/**
 * The repository's calls counted as the request's waits on its database (a deadline passing in one
 * is the database's fault), in child spans when the request is sampled, and its creates counted
 * (`petstore_pets_created_total`) when metrics are on.
 */
export const ObservedPetRepository = Layer.effect(
  PetRepository,
  Effect.gen(function*() {
    const { metrics, tracing } = yield* ObservabilityConfig
    const stored = yield* PetRepository
    const pets = PetRepository.of({
      create: (pet) => waitingOnDatabase(stored.create(pet)),
      createOnce: (scope, claimedAt, fingerprint, pet) =>
        waitingOnDatabase(stored.createOnce(scope, claimedAt, fingerprint, pet)),
      findById: (id) => waitingOnDatabase(stored.findById(id)),
      list: (query) => waitingOnDatabase(stored.list(query)),
      reserve: (scope, abandonedAfterMillis) => waitingOnDatabase(stored.reserve(scope, abandonedAfterMillis)),
      release: (scope, claimedAt) => waitingOnDatabase(stored.release(scope, claimedAt)),
      // Run by /readyz's probe, as the service's own: no request's deadline waits on it.
      readiness: stored.readiness
    })
    const countPetCreated = metrics._tag === "None" ? undefined : petsCreatedCounter()
    const counted: typeof pets = countPetCreated === undefined ? pets : {
      ...pets,
      create: (pet) => Effect.map(pets.create(pet), (created) => (countPetCreated(), created)),
      createOnce: (scope, claimedAt, fingerprint, pet) =>
        Effect.map(pets.createOnce(scope, claimedAt, fingerprint, pet), (created) => (countPetCreated(), created))
    }
    if (tracing._tag === "None") return counted
    const inSpan = (name: string) =>
      inSampledSpan(`PetRepository.${name}`, { "code.function.name": `PetRepository.${name}` })
    const traced = <A extends Array<any>, B, E, R>(name: string, call: (...args: A) => Effect.Effect<B, E, R>) => {
      const inRepositorySpan = inSpan(name)
      return (...args: A) => inRepositorySpan(call(...args))
    }
    return PetRepository.of({
      create: traced("create", counted.create),
      createOnce: traced("createOnce", counted.createOnce),
      findById: traced("findById", counted.findById),
      list: traced("list", counted.list),
      reserve: traced("reserve", counted.reserve),
      release: traced("release", counted.release),
      readiness: inSpan("readiness")(counted.readiness)
    })
  })
)
