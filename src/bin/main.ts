import { Cause, Config, Context, Duration, Effect, Exit, Layer, Logger, Option, References } from "effect"
import { runMainOn } from "../CommandLine/Run.js"
import { AppConfig, describeConfigError, listenersApart } from "../Config/AppConfig.js"
import * as BunServer from "../Http/BunServer.js"
import { InFlightRequests } from "../Http/InFlightRequests.js"
import { RequestLines } from "../Http/RequestLog.js"
import { serveOn } from "../Http/Server.js"
import { summarizeCause } from "../Observability/CauseSummary.js"
import {
  metricsFolderVariable,
  serveGroupMetrics,
  serveMetrics,
  serveWorkerMetrics
} from "../Observability/MetricsServer.js"
import { ObservabilityConfig } from "../Observability/ObservabilityConfig.js"
import { claimPort } from "../Service/PortClaim.js"
import { migrate, StoresLive } from "../Service/Stores.js"
import { stopWhenOrphaned, supervise, workerVariable } from "../Service/Workers.js"

/** How long a stop may run past its grace and drain: closing the server, the database and the trace export. */
const stopMargin = Duration.seconds(2)
let stopBound = stopMargin

// Each signal arms a timer ending the process past the stop's bound, the first's first: finalizers are uninterruptible.
const armStopDeadline = () => {
  // A little before the bound, for the exit itself; unref'd, so a stop that ends in time exits with its own code.
  setTimeout(() => {
    const message = `stopping took longer than ${Duration.format(stopBound)}; exiting without waiting further`
    console.log(JSON.stringify({ message, logLevel: "ERROR", timestamp: new Date().toISOString() }))
    process.exit(1)
  }, Math.max(0, Duration.toMillis(stopBound) - 250)).unref()
}

/** One JSON object per line on stdout, its fields named and ordered as they always were, for what reads the logs. */
const JsonLogs = Logger.layer([
  Logger.withConsoleLog(Logger.map(Logger.formatStructured, (
    { annotations, cause, fiberId, level, message, spans, timestamp }
  ) => JSON.stringify({ message, logLevel: level, timestamp, cause, annotations, spans, fiberId })))
])

/** The server; workers share its port through SO_REUSEPORT, and the kernel spreads connections. */
const ServerLive = Layer.unwrap(
  AppConfig.useSync(({ host, port, workers }) =>
    serveOn(BunServer.layer({ port, hostname: host, reusePort: workers > 1 }))
  )
).pipe(Layer.provide(StoresLive), Layer.provide(RequestLines.Stdout))

const worker = process.env[workerVariable]

const serve = Effect.gen(function*() {
  const { drainTimeout, environment, host, port, stopGrace } = yield* AppConfig
  const inFlight = yield* InFlightRequests
  const { metrics } = yield* ObservabilityConfig
  const metricsFolder = process.env[metricsFolderVariable]
  if (worker !== undefined && metricsFolder !== undefined) yield* serveWorkerMetrics(metricsFolder, Number(worker))
  else if (worker === undefined && Option.isSome(metrics)) yield* serveMetrics(metrics.value.host, metrics.value.port)
  const server = yield* Layer.build(ServerLive)
  // Added after the server, so it runs first on stop: grace, listener, requests in flight; then server and database.
  const closeListener = Context.get(server, BunServer.Listener).close
  yield* Effect.addFinalizer(() => inFlight.stop({ grace: stopGrace, drain: drainTimeout, closeListener }))
  if (worker !== undefined) yield* Effect.forkScoped(stopWhenOrphaned)
  const workerField = worker === undefined ? {} : { worker: Number(worker) }
  yield* Effect.logInfo("listening").pipe(Effect.annotateLogs({ environment, host, port, ...workerField }))
  return yield* Effect.never
}).pipe(Effect.scoped, Effect.provide(InFlightRequests.layer))

/** With `WORKERS` above 1, this process migrates the database once and supervises the servers; else it serves. */
const main = Effect.gen(function*() {
  yield* listenersApart
  const { drainTimeout, host, port, stopGrace, workers } = yield* AppConfig
  const stopTime = Duration.sum(stopGrace, drainTimeout)
  stopBound = Duration.sum(stopTime, stopMargin)
  // Claimed by the single server or the supervisor, first: a second service touches neither database nor port.
  if (worker === undefined) yield* claimPort(host, port)
  if (workers === 1 || worker !== undefined) return yield* serve
  yield* migrate
  const { metrics } = yield* ObservabilityConfig
  // The supervisor serves the metrics port, adding up what each worker serves on its socket.
  const env = Option.isNone(metrics) ? {} : {
    [metricsFolderVariable]: yield* serveGroupMetrics(metrics.value.host, metrics.value.port, workers)
  }
  yield* Effect.logInfo("supervising workers").pipe(Effect.annotateLogs({ port, workers }))
  // A worker still running a second before the supervisor's own bound is ended.
  return yield* supervise(workers, env, Duration.sum(stopTime, Duration.seconds(1)))
}).pipe(
  Effect.scoped,
  // LOG_LEVEL holds for the service's own lines as for the requests'; a failed start is logged at any level.
  (self) => AppConfig.use(({ logLevel }) => Effect.provideService(self, References.MinimumLogLevel, logLevel)),
  Effect.provide([AppConfig.layer, ObservabilityConfig.layer]),
  Effect.tapCause((cause) => {
    const failure = Cause.findErrorOption(cause)
    return Cause.hasInterruptsOnly(cause) ? Effect.void : Effect.logError(
      Option.isSome(failure) && failure.value instanceof Config.ConfigError
        ? `Invalid configuration: (${describeConfigError(failure.value)})`
        : `failed to start: ${summarizeCause(cause)}`
    )
  }),
  Effect.provide(JsonLogs)
)

// SIGHUP too (a closed terminal, a reload); a repeated signal (npm forwards Ctrl-C) must not cut the drain short.
// Exits 0 when it stopped on a signal or ended, 1 when it could not start.
runMainOn(["SIGINT", "SIGTERM", "SIGHUP"], armStopDeadline)(main, {
  disableErrorReporting: true,
  teardown: (exit) => process.exit(Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause) ? 0 : 1)
})
