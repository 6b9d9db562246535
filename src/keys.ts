import { Args, Command, Options } from "@effect/cli"
import { BunContext, BunRuntime } from "@effect/platform-bun"
import { Console, Effect, Layer, Option, Redacted } from "effect"
import { AppConfig } from "./AppConfig.js"
import { type ApiKeyRecord, ApiKeys } from "./Auth/ApiKeys.js"
import { ApiKeysLive } from "./Stores.js"

const describe = (key: ApiKeyRecord) =>
  [
    String(key.id).padEnd(5),
    key.name.padEnd(24),
    `${key.prefix}…`.padEnd(16),
    key.createdAt.toISOString().padEnd(26),
    Option.match(key.revokedAt, { onNone: () => "-", onSome: (at) => at.toISOString() })
  ].join(" ")

const create = Command.make(
  "create",
  { name: Options.text("name").pipe(Options.withDescription("Who or what the key is for")) },
  ({ name }) =>
    Effect.gen(function*() {
      const { key, record } = yield* (yield* ApiKeys).create(name)
      yield* Console.log(`Created key ${record.id} (${record.name}). It is shown this once; store it now:`)
      // The key alone on the last line, so scripts can take it with `tail -n 1`.
      yield* Console.log(Redacted.value(key))
    })
).pipe(Command.withDescription("Create an API key and print it once"))

const list = Command.make("list", {}, () =>
  Effect.gen(function*() {
    const keys = yield* (yield* ApiKeys).list
    yield* Console.log(["id".padEnd(5), "name".padEnd(24), "prefix".padEnd(16), "created".padEnd(26), "revoked"].join(" "))
    for (const key of keys) yield* Console.log(describe(key))
  })).pipe(Command.withDescription("List API keys (never the keys themselves)"))

const revoke = Command.make("revoke", { id: Args.integer({ name: "id" }) }, ({ id }) =>
  Effect.gen(function*() {
    const revoked = yield* (yield* ApiKeys).revoke(id)
    if (Option.isNone(revoked)) {
      return yield* Effect.fail(new Error(`No API key has id ${id}`))
    }
    yield* Console.log(`Revoked key ${id} (${revoked.value.name})`)
  })).pipe(Command.withDescription("Revoke an API key; requests with it are refused from then on"))

const keys = Command.make("keys").pipe(
  Command.withSubcommands([create, list, revoke]),
  Command.withDescription("Manage the API keys of the Pet Store database named by DATABASE_URL")
)

const cli = Command.run(keys, { name: "petstore keys", version: "1.0.0" })

const KeysLive = ApiKeysLive.pipe(Layer.provideMerge(AppConfig.layer))

cli(process.argv).pipe(
  Effect.provide(KeysLive),
  Effect.provide(BunContext.layer),
  Effect.tapErrorCause((cause) => Console.error(String(cause.toString().split("\n")[0]))),
  BunRuntime.runMain({ disableErrorReporting: true, disablePrettyLogger: true })
)
