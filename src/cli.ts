import { Args, Command, Options } from "@effect/cli"
import { BunContext, BunRuntime } from "@effect/platform-bun"
import { Config, Console, Effect, Layer, Logger, Option, Stream } from "effect"
import { PetStoreClient } from "./Client/PetStoreClient.js"
import type { Pet } from "./Domain/Pet.js"
import { PetStatus } from "./Domain/Pet.js"

const statusOption = Options.choice("status", PetStatus.literals).pipe(
  Options.withDescription("Only animals with this status"),
  Options.optional
)
const json = Options.boolean("json").pipe(Options.withDescription("Print JSON instead of a table"))
const baseUrl = Options.text("base-url").pipe(
  Options.withDescription("Address of the service (default: the address of PETSTORE_ENV)"),
  Options.optional
)

const table = (pets: ReadonlyArray<Pet>) => {
  const rows = [["id", "name", "category", "status"], ...pets.map((pet) => [String(pet.id), pet.name, String(pet.categoryId), pet.status ?? "-"])]
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)))
  return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column]!)).join("  ").trimEnd()).join("\n")
}

const print = (asJson: boolean, value: Pet | ReadonlyArray<Pet>) =>
  Console.log(asJson ? JSON.stringify(value, null, 2) : table(Array.isArray(value) ? value : [value as Pet]))

/** The client for `--base-url`, or for `PETSTORE_ENV`'s address, with `PETSTORE_API_KEY`. */
const clientLayer = (url: Option.Option<string>) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const apiKey = yield* Config.redacted("PETSTORE_API_KEY")
    const environment = yield* Config.literal("production", "staging")("PETSTORE_ENV").pipe(Config.withDefault("staging"))
    return PetStoreClient.layer({
      target: Option.match(url, { onNone: () => ({ environment }), onSome: (baseUrl) => ({ baseUrl }) }),
      apiKey
    })
  }))

const list = Command.make(
  "list",
  {
    status: statusOption,
    limit: Options.integer("limit").pipe(Options.withDescription("Animals per page, 1 to 100"), Options.optional),
    all: Options.boolean("all").pipe(Options.withDescription("Follow the pages to the last one")),
    json,
    baseUrl
  },
  ({ all, baseUrl, json, limit, status }) =>
    Effect.gen(function*() {
      const client = yield* PetStoreClient
      const params = { status: Option.getOrUndefined(status), limit: Option.getOrUndefined(limit) }
      const pets = all
        ? yield* Stream.runCollect(client.listAll({ status: params.status, pageSize: params.limit }))
        : (yield* client.listPets(params)).pets
      yield* print(json, [...pets])
    }).pipe(Effect.provide(clientLayer(baseUrl)))
).pipe(Command.withDescription("List animals"))

const create = Command.make(
  "create",
  {
    name: Options.text("name"),
    categoryId: Options.integer("category-id"),
    status: statusOption,
    json,
    baseUrl
  },
  ({ baseUrl, categoryId, json, name, status }) =>
    Effect.gen(function*() {
      const client = yield* PetStoreClient
      const pet = yield* client.createPet(
        Option.match(status, { onNone: () => ({ name, categoryId }), onSome: (status) => ({ name, categoryId, status }) })
      )
      yield* print(json, pet)
    }).pipe(Effect.provide(clientLayer(baseUrl)))
).pipe(Command.withDescription("Add an animal"))

const get = Command.make(
  "get",
  { id: Args.integer({ name: "id" }), json, baseUrl },
  ({ baseUrl, id, json }) =>
    Effect.gen(function*() {
      const pet = yield* (yield* PetStoreClient).getPet(id)
      yield* print(json, pet)
    }).pipe(Effect.provide(clientLayer(baseUrl)))
).pipe(Command.withDescription("Fetch one animal (deprecated endpoint)"))

const petstore = Command.make("petstore").pipe(
  Command.withSubcommands([Command.make("pets").pipe(Command.withSubcommands([list, create, get]))]),
  Command.withDescription("The Pet Store from the terminal")
)

Command.run(petstore, { name: "petstore", version: "1.0.0" })(process.argv).pipe(
  // The interface's message, alone, and a non-zero exit.
  Effect.tapErrorCause((cause) => {
    const error = cause._tag === "Fail" ? cause.error : undefined
    const message = error !== null && typeof error === "object" && "message" in error ? String(error.message) : String(cause)
    return Console.error(message)
  }),
  // Warnings (such as the deprecation of `pets get`) go to stderr, so that stdout stays parseable.
  Effect.provide(Logger.replace(Logger.defaultLogger, Logger.prettyLogger({ stderr: true, colors: false }))),
  Effect.provide(BunContext.layer),
  BunRuntime.runMain({ disableErrorReporting: true, disablePrettyLogger: true })
)
