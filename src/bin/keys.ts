import { Console, Effect, Layer, Option, Redacted, Schema } from "effect"
import { Command, Flag } from "effect/cli"
import { ApiKeyRecord, ApiKeys } from "../Auth/ApiKeys.js"
import { integerArgument, nameOption, switchOption } from "../CommandLine/Options.js"
import { run } from "../CommandLine/Run.js"
import { AppConfig } from "../Config/AppConfig.js"
import { ApiKeysLive } from "../Service/Stores.js"

const row = (cells: ReadonlyArray<string>) => cells.map((cell, i) => cell.padEnd([5, 24, 16, 26, 0][i]!)).join(" ")

const create = Command.make(
  "create",
  { name: nameOption("name", 255).pipe(Flag.withDescription("Who or what the key is for")) },
  ({ name }) =>
    Effect.gen(function*() {
      const { key, record } = yield* (yield* ApiKeys).create(name)
      yield* Console.log(`Created key ${record.id} (${record.name}). It is shown this once; store it now:`)
      // The key alone on the last line, so scripts can take it with `tail -n 1`.
      yield* Console.log(Redacted.value(key))
    })
).pipe(Command.withDescription("Create an API key and print it once"))

/** The records as JSON: dates as ISO strings, `revokedAt` null while the key is valid. */
const encodeRecords = Schema.encodeSync(Schema.Array(ApiKeyRecord))

const list = Command.make(
  "list",
  { json: switchOption("json").pipe(Flag.withDescription("Print the records as a JSON array")) },
  ({ json }) =>
    Effect.gen(function*() {
      const keys = yield* (yield* ApiKeys).list
      if (json) return yield* Console.log(JSON.stringify(encodeRecords(keys), null, 2))
      yield* Console.log(row(["id", "name", "prefix", "created", "revoked"]))
      for (const key of keys) {
        const revoked = Option.match(key.revokedAt, { onNone: () => "-", onSome: (at) => at.toISOString() })
        yield* Console.log(row([String(key.id), key.name, `${key.prefix}…`, key.createdAt.toISOString(), revoked]))
      }
    })
).pipe(Command.withDescription("List API keys (never the keys themselves)"))

const revoke = Command.make("revoke", { id: integerArgument("id") }, ({ id }) =>
  Effect.gen(function*() {
    const revoked = yield* (yield* ApiKeys).revoke(id)
    yield* Console.log(`Revoked key ${id} (${revoked.name})`)
  })).pipe(Command.withDescription("Revoke an API key; requests with it are refused from then on"))

const keys = Command.make("keys").pipe(
  Command.withSubcommands([create, list, revoke]),
  Command.withDescription("Manage the API keys of the Pet Store database named by DATABASE_URL"),
  // Opened for a subcommand only: `--help` neither needs the database nor creates its file.
  Command.provide(ApiKeysLive.pipe(Layer.provideMerge(AppConfig.layer)))
)

run(Command.run(keys, { version: "1.0.0" }))
