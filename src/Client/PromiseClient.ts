import { Cause, Effect, Exit, ManagedRuntime, Option, Record, Redacted, Stream } from "effect"
import type { HttpClientResponse } from "effect/http"
import { PetStoreApi } from "../Api.js"
import { PetStoreClient, type PetStoreClientOptions } from "./PetStoreClient.js"

/** The Effect client's options, the API key (sent as the bearer credential) as a string. */
export type PromiseClientOptions = Omit<PetStoreClientOptions, "apiKey"> & { readonly apiKey: string }

type Service = PetStoreClient["Service"]
type Response = HttpClientResponse.HttpClientResponse
type Endpoints = Record<string, Record<string, (request: object) => Effect.Effect<unknown, unknown>>>

/** The Effect client's groups of endpoints, each endpoint answering a Promise of its decoded success. */
type Groups = {
  readonly [Group in keyof typeof PetStoreApi.groups]: {
    readonly [Name in keyof Service[Group]]: Service[Group][Name] extends
      (...args: infer Args) => Effect.Effect<infer A, infer _E> ?
      (...args: Args) => Promise<Exclude<A, Response | readonly [unknown, Response]>>
      : never
  }
}

/** The client for code without Effect: each operation a Promise, the interface's errors thrown as their classes. */
export const createPetStoreClient = (options: PromiseClientOptions) => {
  const runtime = ManagedRuntime.make(PetStoreClient.layer({ ...options, apiKey: Redacted.make(options.apiKey) }))
  const run = async <A, E>(f: (client: Service) => Effect.Effect<A, E>): Promise<A> => {
    const exit = await runtime.runPromiseExit(Effect.flatMap(PetStoreClient, f))
    if (Exit.isSuccess(exit)) return exit.value
    throw Cause.squash(exit.cause)
  }
  // The casts meet at the names: the definition's at run time, which `Groups` spells out for the caller.
  const call = (group: string, name: string) => (request?: object) =>
    run((client) => (client as unknown as Endpoints)[group]![name]!({ ...request, responseMode: "decoded-only" }))
  const groups = Object.fromEntries(
    Object.values(PetStoreApi.groups).map(({ endpoints, identifier }) => [
      identifier,
      Record.map(endpoints as Record<string, unknown>, (_, name) => call(identifier, name))
    ])
  ) as unknown as Groups
  return {
    ...groups,
    /** One page of animals, and the cursor of the next page when there is one. */
    listPets: (...args: Parameters<Service["listPets"]>) =>
      run((client) =>
        Effect.map(client.listPets(...args), ({ next, pets }) => ({ pets, nextCursor: Option.getOrUndefined(next) }))
      ),
    /** Every matching animal, fetched page by page as the loop asks for them. */
    listAll: async function*(...args: Parameters<Service["listAll"]>) {
      yield* await run((client) => Stream.toAsyncIterableEffect(client.listAll(...args)))
    },
    createPet: (...args: Parameters<Service["createPet"]>) => run((client) => client.createPet(...args)),
    /** @deprecated Removed on 5 December 2030: use `listPets` or `listAll` with `status`. */
    getPet: (petId: number) => run((client) => client.getPet(petId)),
    /** Releases the client's resources. */
    close: () => runtime.dispose()
  }
}
