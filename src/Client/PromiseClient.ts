import { Cause, Effect, Exit, ManagedRuntime, Redacted } from "effect"
import type { NewPet, Pet, PetStatus } from "../Domain/Pet.js"
import { PetStoreClient, type Target } from "./PetStoreClient.js"

export interface PromiseClientOptions {
  readonly target: Target
  /** The API key, sent as the bearer credential. */
  readonly apiKey: string
  readonly retries?: number | undefined
}

/**
 * The Pet Store client for code that does not use Effect: every operation returns a Promise, and
 * the interface's errors are thrown as instances of the exported error classes (`BadRequest`,
 * `Unauthorized`, `NotFound`, `Gone`, …), each with `code`, `message` and `status`.
 *
 * ```ts
 * const client = createPetStoreClient({ target: { baseUrl: "http://localhost:3000" }, apiKey })
 * const pets = await client.listPets({ status: "available" })
 * ```
 */
export const createPetStoreClient = (options: PromiseClientOptions) => {
  const runtime = ManagedRuntime.make(
    PetStoreClient.layer({ target: options.target, apiKey: Redacted.make(options.apiKey), retries: options.retries })
  )
  const run = async <A, E>(f: (client: PetStoreClient["Service"]) => Effect.Effect<A, E>): Promise<A> => {
    const exit = await runtime.runPromiseExit(Effect.flatMap(PetStoreClient, f))
    if (Exit.isSuccess(exit)) return exit.value
    throw Cause.squash(exit.cause)
  }
  /** One page of animals, and the cursor of the next page when there is one. */
  const listPets = (
    params: { readonly status?: PetStatus; readonly limit?: number; readonly cursor?: string | undefined } = {}
  ) =>
    run((client) => client.listPets(params)).then(({ next, pets }) => ({
      pets,
      nextCursor: next._tag === "Some" ? next.value : undefined
    }))
  return {
    listPets,
    /** Every matching animal, fetched page by page as the loop asks for them. */
    listAll: async function*(
      params: { readonly status?: PetStatus; readonly pageSize?: number } = {}
    ): AsyncGenerator<Pet, void, undefined> {
      let cursor: string | undefined
      do {
        const page = await listPets({
          ...params.status ? { status: params.status } : {},
          ...params.pageSize ? { limit: params.pageSize } : {},
          cursor
        })
        yield* page.pets
        cursor = page.nextCursor
      } while (cursor !== undefined)
    },
    createPet: (pet: NewPet, createOptions: { readonly idempotencyKey?: string } = {}) =>
      run((client) => client.createPet(pet, createOptions)),
    /** @deprecated Removed on 5 December 2030: use `listPets` or `listAll` with `status`. */
    getPet: (petId: number) => run((client) => client.getPet(petId)),
    /** Releases the client's resources. */
    close: () => runtime.dispose()
  }
}
