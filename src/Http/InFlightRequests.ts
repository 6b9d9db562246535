import { Context, Deferred, Duration, Effect, Exit, Layer } from "effect"
import { HttpServerResponse } from "effect/http"
import { retryAfterHeader } from "../Domain/ApiError.js"
import { shuttingDown, Stopping } from "../Health/Stopping.js"
import { errorResponse } from "../Request/ErrorResponse.js"

const refused = errorResponse(shuttingDown, { connection: "close", ...retryAfterHeader("shutting_down") })

export type App<E, R> = Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>

/** Counts the requests in flight and runs the stop a load balancer expects: grace, listener closed, drain. */
export class InFlightRequests extends Context.Service<InFlightRequests, {
  /** Where requests enter: counted while they run, and told to close their connection once the stop begins. */
  readonly middleware: <E, R>(app: App<E, R>) => App<E, R>
  /** A route's handler, refusing once the listener is closed: after routing, so labelled by its route. */
  readonly refusingWhenClosed: <E, R>(handler: App<E, R>) => App<E, R>
  readonly stop: (options: {
    /** How long everything but `/readyz` is still served: a load balancer's time to take the instance out. */
    readonly grace: Duration.Input
    /** How long the requests in flight may take to finish once the listener is closed. */
    readonly drain: Duration.Input
    /** Stops accepting connections and closes the idle ones; those with a request in flight close after it. */
    readonly closeListener: Effect.Effect<void>
  }) => Effect.Effect<void>
}>()("petstore/InFlightRequests") {
  /** The service, and `Stopping` for the readiness probe. */
  static readonly layer = Layer.effectContext(Effect.sync(() => {
    let running = 0
    // In the grace `/readyz` answers 503 and the rest `Connection: close`; once closed a late request is refused.
    let phase: "serving" | "grace" | "closed" = "serving"
    // Done once the listener is closed and no request is running.
    const idle = Deferred.makeUnsafe<void>()
    const finished = Effect.sync(() => {
      running--
      if (running === 0 && phase === "closed") Deferred.doneUnsafe(idle, Exit.void)
    })
    const inFlight = InFlightRequests.of({
      middleware: (app) =>
        Effect.suspend(() => {
          running++
          // However it ends; the phase read at the answer, so one begun before the stop closes too.
          return Effect.map(
            Effect.onExit(app, () => finished),
            (response) => phase === "serving" ? response : HttpServerResponse.setHeader(response, "connection", "close")
          )
        }),
      refusingWhenClosed: (handler) => Effect.suspend(() => phase === "closed" ? Effect.succeed(refused) : handler),
      stop: ({ closeListener, drain, grace }) =>
        Effect.gen(function*() {
          phase = "grace"
          yield* Effect.logInfo("stopping: not ready; serving on for the grace").pipe(
            Effect.annotateLogs({ graceSeconds: Duration.toSeconds(Duration.fromInputUnsafe(grace)) })
          )
          yield* Effect.sleep(grace)
          phase = "closed"
          yield* closeListener
          yield* Effect.logInfo("stopping: finishing the requests in flight").pipe(Effect.annotateLogs({ running }))
          if (running === 0) return
          // Interruptible: the stop runs in a finalizer, where the timeout could not otherwise end it.
          yield* Effect.interruptible(Deferred.await(idle)).pipe(Effect.timeoutOption(drain))
        })
    })
    return Context.make(InFlightRequests, inFlight).pipe(Context.add(Stopping, { begun: () => phase !== "serving" }))
  }))
}
