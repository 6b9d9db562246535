/** The Pet Store client, for Effect programs and for Promise-based code; it imports no server code. */
export { PetStoreClient, type PetStoreClientOptions, type Target } from "./Client/PetStoreClient.js"
export { createPetStoreClient, type PromiseClientOptions } from "./Client/PromiseClient.js"
export {
  BadRequest,
  Conflict,
  Gone,
  InternalError,
  MethodNotAllowed,
  NotFound,
  PayloadTooLarge,
  ServiceUnavailable,
  Unauthorized,
  UnprocessableContent,
  UnsupportedMediaType
} from "./Domain/ApiError.js"
export type { NewPet, Pet, PetStatus } from "./Domain/Pet.js"
