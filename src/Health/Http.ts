import { type Context, Effect, Fiber } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { PetStoreApi } from "../Api.js"
import { ServiceUnavailable } from "../Domain/ApiError.js"
import { PetRepository, type Readiness } from "../Pets/PetRepository.js"
import { shuttingDown, Stopping } from "./Stopping.js"

/** A probe still waiting after this long has met a database that does not answer (it ends in the background). */
const probeTimeout = "750 millis"

/** A check's wait for the probe before it answers the last finding: HAProxy gives it 2 s, Kubernetes 1 s. */
const freshWait = "100 millis"

/** One probe of the store at a time, its finding kept for the checks that do not wait; run as no request's. */
const makeProbe = (check: Effect.Effect<Readiness>, context: Context.Context<never>) => {
  let last: Readiness = "ready"
  let running: Fiber.Fiber<Readiness> | undefined
  const probe = check.pipe(
    Effect.timeoutOrElse({ duration: probeTimeout, orElse: () => Effect.succeed<Readiness>("unavailable") }),
    Effect.tap((found) => Effect.sync(() => (last = found))),
    Effect.ensuring(Effect.sync(() => (running = undefined)))
  )
  const started = Effect.sync(() => {
    if (running !== undefined) return running
    const fiber = Effect.runForkWith(context)(probe)
    // One already ended (a store answering at once) is not kept for the next check.
    if (fiber.pollUnsafe() === undefined) running = fiber
    return fiber
  })
  return Effect.flatMap(
    started,
    (fiber) => Effect.timeoutOrElse(Fiber.join(fiber), { duration: freshWait, orElse: () => Effect.sync(() => last) })
  )
}

/** This instance cannot use its SQLite file: the one fault of the store that is its alone. */
const unusable = new ServiceUnavailable({
  code: "database_unavailable",
  message: "database: this instance's SQLite file was deleted, replaced or is damaged; restart it on the right file",
  status: 503
})

export const HealthHttpLive = HttpApiBuilder.group(PetStoreApi, "health", (handlers) =>
  Effect.gen(function*() {
    const probe = makeProbe((yield* PetRepository).readiness, yield* Effect.context<never>())
    const stopping = yield* Stopping
    return handlers
      .handle("livez", () => Effect.succeed({ status: "ok" as const }))
      .handle("readyz", () =>
        stopping.begun()
          ? Effect.fail(shuttingDown)
          : Effect.flatMap(probe, (database) =>
            // A shared database's fault stays ready: with every instance out, clients would get the balancer's page.
            database === "unusable" ? Effect.fail(unusable) : Effect.succeed({ status: "ok" as const, database })))
  }))
