import { Effect, Fiber } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { PetStoreApi } from "../Api.js"
import { ServiceUnavailable } from "../Domain/ApiError.js"
import { PetRepository, type Readiness } from "../Pets/PetRepository.js"
import { shuttingDown, Stopping } from "./Stopping.js"

/**
 * A probe of the store still waiting after this long has met a database that does not answer (it
 * finishes in the background).
 */
const probeTimeout = "750 millis"

/**
 * How long a check waits for the probe before it answers with the last probe's finding: a load
 * balancer's check must get its answer at once, whatever the database does, even on a loaded
 * machine (HAProxy gives it 2 s, Kubernetes 1 s by default). A store that answers is answered
 * about fresh; one that does not is named by the probe before.
 */
const freshWait = "100 millis"

/**
 * `/readyz`'s view of the store: one probe at a time, its finding kept for the checks that do not
 * wait for it. A probe runs as the service's own, with the layer's services, not as the request
 * that started it: its spans, logs and database waits belong to no request.
 */
const makeProbe = (
  check: Effect.Effect<Readiness>,
  fork: (probe: Effect.Effect<Readiness>) => Fiber.Fiber<Readiness>
) => {
  let last: Readiness = "ready"
  let running: Fiber.Fiber<Readiness> | undefined
  const probe = check.pipe(
    Effect.timeoutOrElse({ duration: probeTimeout, orElse: () => Effect.succeed<Readiness>("unavailable") }),
    Effect.tap((found) => Effect.sync(() => (last = found))),
    Effect.ensuring(Effect.sync(() => (running = undefined)))
  )
  const started = Effect.suspend(() =>
    running === undefined
      ? Effect.sync(() => {
        const fiber = fork(probe)
        // One that has already ended (a store answering at once) is not kept for the next check.
        if (fiber.pollUnsafe() === undefined) running = fiber
        return fiber
      })
      : Effect.succeed(running)
  )
  return Effect.flatMap(
    started,
    (fiber) => Effect.timeoutOrElse(Fiber.join(fiber), { duration: freshWait, orElse: () => Effect.sync(() => last) })
  )
}

const ok = { status: "ok" } as const

/** This instance cannot use its SQLite file: the one fault of the store that is its alone. */
const unusable = new ServiceUnavailable({
  code: "database_unavailable",
  message: "database: this instance's SQLite file was deleted, replaced or is damaged; restart it on the right file",
  status: 503
})

export const HealthHttpLive = HttpApiBuilder.group(PetStoreApi, "health", (handlers) =>
  Effect.gen(function*() {
    const probe = makeProbe((yield* PetRepository).readiness, Effect.runForkWith(yield* Effect.context<never>()))
    const stopping = yield* Stopping
    return handlers
      .handle("livez", () => Effect.succeed(ok))
      .handle("readyz", () =>
        stopping.begun()
          ? Effect.fail(shuttingDown)
          : Effect.flatMap(probe, (database) =>
            // A fault of the shared database stays ready: a balancer taking every instance out
            // would leave clients its own error page instead of the service's 503 with Retry-After.
            database === "unusable" ? Effect.fail(unusable) : Effect.succeed({ status: "ok" as const, database })))
  }))
