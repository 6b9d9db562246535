import { Config, Console, Effect, Logger, Option, Redacted, Stream } from "effect"
import { Command, Flag } from "effect/cli"
import { PetStoreClient } from "../Client/PetStoreClient.js"
import { newPetFromOptions, newPetOptionNames } from "../CommandLine/NewPetOptions.js"
import { choiceOption, integerArgument, integerOption, switchOption, urlOption } from "../CommandLine/Options.js"
import { petTable } from "../CommandLine/PetTable.js"
import { run } from "../CommandLine/Run.js"
import { httpUrl } from "../Config/AppConfig.js"
import { type Pet, PetStatus } from "../Domain/Pet.js"

const statusOption = choiceOption("status", PetStatus.literals).pipe(
  Flag.withDescription("Only animals with this status: available, pending or sold"),
  Flag.optional
)
const json = switchOption("json").pipe(Flag.withDescription("Print JSON instead of a table"))
const baseUrl = urlOption("base-url").pipe(
  Flag.withDescription("Address of the service (default: PETSTORE_BASE_URL, else http://localhost:3000)"),
  Flag.optional
)

/** Prints what `call` answers from the client for `url`, else `PETSTORE_BASE_URL`, else the local service. */
const print = <E>(
  url: Option.Option<string>,
  asJson: boolean,
  call: (client: PetStoreClient["Service"]) => Effect.Effect<Pet | ReadonlyArray<Pet>, E>
) =>
  Effect.gen(function*() {
    // An empty variable counts as unset, as a shell's `PETSTORE_BASE_URL= petstore …` means (Config reads it so).
    const baseUrl = Option.isSome(url)
      ? url.value
      : yield* httpUrl("PETSTORE_BASE_URL").pipe(Config.withDefault("http://localhost:3000"))
    const apiKey = yield* Config.option(Config.String("PETSTORE_API_KEY"))
    if (Option.isNone(apiKey)) return yield* Effect.fail(new Error("PETSTORE_API_KEY: must be set"))
    const client = PetStoreClient.layer({ target: { baseUrl }, apiKey: Redacted.make(apiKey.value) })
    const value = yield* Effect.provide(PetStoreClient.use(call), client)
    yield* Console.log(
      asJson ? JSON.stringify(value, null, 2) : petTable(Array.isArray(value) ? value : [value as Pet])
    )
  })

const list = Command.make(
  "list",
  {
    status: statusOption,
    limit: integerOption("limit").pipe(
      Flag.withDescription("Animals per page, an integer from 1 to 100"),
      Flag.optional
    ),
    all: switchOption("all").pipe(Flag.withDescription("Follow the pages to the last one")),
    json,
    baseUrl
  },
  ({ all, baseUrl, json, limit, status }) =>
    print(baseUrl, json, (client) => {
      const params = { status: Option.getOrUndefined(status), limit: Option.getOrUndefined(limit) }
      return all
        ? Stream.runCollect(client.listAll({ status: params.status, pageSize: params.limit }))
        : Effect.map(client.listPets(params), ({ pets }) => pets)
    })
).pipe(Command.withDescription("List animals"))

const create = Command.make(
  "create",
  { name: Flag.String("name"), categoryId: integerOption("category-id"), status: statusOption, json, baseUrl },
  ({ baseUrl, categoryId, json, name, status }) =>
    print(baseUrl, json, (client) => client.createPet(newPetFromOptions({ name, categoryId, status })))
).pipe(Command.withDescription("Add an animal"))

const get = Command.make(
  "get",
  { id: integerArgument("id"), json, baseUrl },
  ({ baseUrl, id, json }) => print(baseUrl, json, (client) => client.getPet(id))
).pipe(Command.withDescription("Fetch one animal (deprecated endpoint)"))

const petstore = Command.make("petstore").pipe(
  Command.withSubcommands([Command.make("pets").pipe(Command.withSubcommands([list, create, get]))]),
  Command.withDescription("The Pet Store from the terminal")
)

run(
  Command.run(petstore, { version: "1.0.0" }).pipe(
    // Warnings (such as the deprecation of `pets get`) go to stderr, so that stdout stays parseable.
    Effect.provide(Logger.layer([Logger.consolePretty({ colors: false, mode: "tty" })])),
    Effect.provideService(Logger.LogToStderr, true)
  ),
  // A field the client refuses is named by the option that set it.
  { ...newPetOptionNames, limit: "--limit" }
)
