import { Command, Options } from "@effect/cli"
import { Config, Console, Effect, Layer, Logger, Option, Redacted, Stream } from "effect"
import { PetStoreClient } from "../Client/PetStoreClient.js"
import { choiceOption, integerArgument, integerOption, isHttpUrl, urlOption } from "../CommandLine/Options.js"
import { run } from "../CommandLine/Run.js"
import type { Pet } from "../Domain/Pet.js"
import { PetStatus } from "../Domain/Pet.js"

const statusOption = choiceOption("status", PetStatus.literals).pipe(
  Options.withDescription("Only animals with this status: available, pending or sold"),
  Options.optional
)
const json = Options.boolean("json").pipe(Options.withDescription("Print JSON instead of a table"))
const baseUrl = urlOption("base-url").pipe(
  Options.withDescription("Address of the service (default: PETSTORE_BASE_URL, else http://localhost:3000)"),
  Options.optional
)

const table = (pets: ReadonlyArray<Pet>) => {
  const rows = [["id", "name", "category", "status"], ...pets.map((pet) => [String(pet.id), pet.name, String(pet.categoryId), pet.status ?? "-"])]
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)))
  return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column]!)).join("  ").trimEnd()).join("\n")
}

const print = (asJson: boolean, value: Pet | ReadonlyArray<Pet>) =>
  Console.log(asJson ? JSON.stringify(value, null, 2) : table(Array.isArray(value) ? value : [value as Pet]))

// An empty variable counts as unset, as a shell's `PETSTORE_BASE_URL= petstore …` means.
const baseUrlFromEnvironment = Config.string("PETSTORE_BASE_URL").pipe(
  Config.validate({ message: "must be an absolute http(s) URL", validation: (url) => url === "" || isHttpUrl(url) }),
  Config.withDefault(""),
  Config.map((url) => url === "" ? "http://localhost:3000" : url)
)

const apiKey = Config.string("PETSTORE_API_KEY").pipe(
  Config.validate({ message: "must be set", validation: (key) => key !== "" }),
  Config.map(Redacted.make)
)

/** The client for `--base-url`, else `PETSTORE_BASE_URL`, else the local service, with `PETSTORE_API_KEY`. */
const clientLayer = (url: Option.Option<string>) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const baseUrl = Option.isSome(url) ? url.value : yield* baseUrlFromEnvironment
    return PetStoreClient.layer({ target: { baseUrl }, apiKey: yield* apiKey })
  }))

const list = Command.make(
  "list",
  {
    status: statusOption,
    limit: integerOption("limit").pipe(Options.withDescription("Animals per page, an integer from 1 to 100"), Options.optional),
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
    categoryId: integerOption("category-id"),
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
  { id: integerArgument("id"), json, baseUrl },
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
  // Warnings (such as the deprecation of `pets get`) go to stderr, so that stdout stays parseable.
  Effect.provide(Logger.replace(Logger.defaultLogger, Logger.prettyLogger({ stderr: true, colors: false }))),
  // A field the client refuses is named by the option that set it.
  (program) => run(program, { name: "--name", categoryId: "--category-id", status: "--status", limit: "--limit" })
)
