import { BunHttpServer, BunRuntime } from "@effect/platform-bun"
import { ConfigError, Effect, Layer, Logger } from "effect"
import { AppConfig } from "./AppConfig.js"
import { HttpLive } from "./Http.js"
import { InFlightRequests } from "./Http/InFlightRequests.js"
import { RequestLines } from "./Http/RequestLog.js"
import { StoresLive } from "./Stores.js"

const ServerLive = Layer.unwrapEffect(
  Effect.map(AppConfig, ({ host, port }) =>
    HttpLive.pipe(Layer.provide(BunHttpServer.layer({ port, hostname: host, development: false })))
  )
).pipe(Layer.provide(StoresLive), Layer.provide(RequestLines.Stdout))

/** How long a stop waits for the requests in flight. */
const drainTimeout = "10 seconds"

const main = Effect.gen(function*() {
  const config = yield* AppConfig
  const inFlight = yield* InFlightRequests
  yield* Layer.build(ServerLive)
  // Added after the server, so it runs first on stop: running requests finish before the server,
  // then the database, close.
  yield* Effect.addFinalizer(() =>
    Effect.logInfo("stopping: finishing the requests in flight").pipe(Effect.zipRight(inFlight.drain(drainTimeout)))
  )
  yield* Effect.logInfo("listening").pipe(
    Effect.annotateLogs({ environment: config.environment, host: config.host, port: config.port })
  )
  return yield* Effect.never
}).pipe(
  Effect.scoped,
  Effect.provide(InFlightRequests.layer),
  Effect.provide(AppConfig.layer),
  Effect.catchIf(ConfigError.isConfigError, (error) =>
    Effect.logError(`Invalid configuration: ${error}`).pipe(Effect.zipRight(Effect.fail(error)))),
  Effect.tapErrorCause((cause) => Effect.logError("failed to start", cause)),
  Effect.provide(Logger.json)
)

// runMain interrupts on SIGINT and SIGTERM; the process then exits 0, or 1 if it could not start.
BunRuntime.runMain(main, { disableErrorReporting: true, disablePrettyLogger: true })
