import { BunHttpServer, BunRuntime } from "@effect/platform-bun"
import { ConfigError, Effect, Layer, Logger } from "effect"
import { AppConfig } from "./AppConfig.js"
import { ApiKeys } from "./Auth/ApiKeys.js"
import { HttpLive } from "./Http.js"
import { Cursors } from "./Pets/Cursors.js"
import { PetRepository } from "./Pets/PetRepository.js"
import { Database } from "./Sql/Database.js"

/** The stores on the configured database. */
const StoresLive = Layer.mergeAll(PetRepository.Sql, ApiKeys.Sql, Cursors.Sql).pipe(Layer.provide(Database))

const ServerLive = Layer.unwrapEffect(
  Effect.map(AppConfig, ({ host, port }) =>
    HttpLive.pipe(Layer.provide(BunHttpServer.layer({ port, hostname: host, development: false })))
  )
).pipe(Layer.provide(StoresLive))

const main = Effect.gen(function*() {
  const config = yield* AppConfig
  yield* Effect.logInfo("starting").pipe(
    Effect.annotateLogs({ environment: config.environment, host: config.host, port: config.port })
  )
  return yield* Layer.launch(ServerLive).pipe(Logger.withMinimumLogLevel(config.logLevel))
}).pipe(
  Effect.provide(AppConfig.layer),
  Effect.catchIf(ConfigError.isConfigError, (error) =>
    Effect.logError(`Invalid configuration: ${error}`).pipe(Effect.zipRight(Effect.fail(error)))),
  Effect.provide(Logger.json)
)

// runMain interrupts on SIGINT/SIGTERM: the server stops accepting, drains, and the database closes.
BunRuntime.runMain(main, { disableErrorReporting: true, disablePrettyLogger: true })
