import { Cause, Config, Context, Duration, Effect, Exit, Layer, Option, References } from "effect"
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
import { JsonLogs } from "../Service/JsonLogs.js"
import { claimPort } from "../Service/PortClaim.js"
import { stopDeadline, stopMargin } from "../Service/StopDeadline.js"
import { migrate, StoresLive } from "../Service/Stores.js"
import { stopWhenOrphaned, supervise, workerVariable } from "../Service/Workers.js"

/** The server; workers share its port through SO_REUSEPORT, and the kernel spreads connections. */
const ServerLive = Layer.unwrap(
  AppConfig.useSync(({ host, port, workers }) =>
    serveOn(BunServer.layer({ port, hostname: host, reusePort: workers > 1 }))
  )
).pipe(Layer.provide(StoresLive), Layer.provide(RequestLines.Stdout))

const worker = process.env[workerVariable]

/** One server process, until SIGTERM, SIGINT or SIGHUP. */
const serve = Effect.gen(function*() {
  const config = yield* AppConfig
  const inFlight = yield* InFlightRequests
  const { metrics } = yield* ObservabilityConfig
  const metricsFolder = process.env[metricsFolderVariable]
  if (worker !== undefined && metricsFolder !== undefined) yield* serveWorkerMetrics(metricsFolder, Number(worker))
  else if (worker === undefined && Option.isSome(metrics)) yield* serveMetrics(metrics.value.host, metrics.value.port)
  const server = yield* Layer.build(ServerLive)
  // Added after the server, so it runs first on stop: the grace, the listener's close and the
  // requests in flight finish before the server, then the database, close.
  yield* Effect.addFinalizer(() =>
    inFlight.stop({
      grace: config.stopGrace,
      drain: config.drainTimeout,
      closeListener: Context.get(server, BunServer.Listener).close
    })
  )
  if (worker !== undefined) yield* Effect.forkScoped(stopWhenOrphaned)
  yield* Effect.logInfo("listening").pipe(
    Effect.annotateLogs({
      environment: config.environment,
      host: config.host,
      port: config.port,
      ...(worker === undefined ? {} : { worker: Number(worker) })
    })
  )
  return yield* Effect.never
}).pipe(Effect.scoped, Effect.provide(InFlightRequests.layer))

/** With `WORKERS` above 1, this process migrates the database once and supervises the servers; else it serves. */
const main = Effect.gen(function*() {
  yield* listenersApart
  const { drainTimeout, host, port, stopGrace, workers } = yield* AppConfig
  const stopTime = Duration.sum(stopGrace, drainTimeout)
  yield* Effect.sync(() => stopDeadline.set(Duration.sum(stopTime, stopMargin)))
  // The service's claim, held by the single server or the supervisor (never its workers) until it
  // ends, before anything else: a second service on the port touches neither database nor port.
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
  return yield* supervise(workers, env, Duration.sum(stopTime, Duration.millis(Duration.toMillis(stopMargin) / 2)))
}).pipe(
  Effect.scoped,
  // LOG_LEVEL holds for the service's own lines (`listening`, …) as for the requests'; a start that
  // fails says why whatever it is (below, outside it).
  (self) => AppConfig.use(({ logLevel }) => Effect.provideService(self, References.MinimumLogLevel, logLevel)),
  Effect.provide([AppConfig.layer, ObservabilityConfig.layer]),
  Effect.tapCause((cause) => {
    const failure = Cause.findErrorOption(cause)
    return Cause.hasInterruptsOnly(cause) ? Effect.void : Effect.logError(
      Option.isSome(failure) && failure.value instanceof Config.ConfigError
        // It names the variable: "(Invalid data at PORT: …)".
        ? `Invalid configuration: (${describeConfigError(failure.value)})`
        : `failed to start: ${summarizeCause(cause)}`
    )
  }),
  Effect.provide(JsonLogs)
)

// SIGHUP too: a closed terminal or a supervisor's reload sends it, and by default it would end the
// process at once, cutting the requests in flight.
const stopSignals = ["SIGINT", "SIGTERM", "SIGHUP"] as const

// A terminal's Ctrl-C reaches both this process and npm, which forwards it: the repeated signal must
// not cut the drain short. The first signal arms the stop's deadline.
for (const signal of stopSignals) process.on(signal, stopDeadline.arm)
// Exits 0 when it stopped on a signal or ended, 1 when it could not start.
runMainOn(stopSignals)(main, {
  disableErrorReporting: true,
  teardown: (exit, onExit) => {
    const code = Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause) ? 0 : 1
    onExit(code)
    process.exit(code)
  }
})
