import { HttpApi, OpenApi } from "effect/http-api"
import { HealthApi } from "./Api/Health.js"
import { finishDocument } from "./Api/OpenApiDocument.js"
import { PetsApi } from "./Api/Pets.js"

/**
 * The Pet Store API: the single definition the server, the derived client, the OpenAPI document and
 * the tests are built from. It imports no server code.
 */
export class PetStoreApi extends HttpApi.make("petstore")
  .add(PetsApi)
  .add(HealthApi)
  .annotate(OpenApi.Title, "Pet Store")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(OpenApi.Description, "A catalogue of animals held in a store.")
  .annotate(OpenApi.License, { name: "Proprietary" })
  .annotate(OpenApi.Transform, finishDocument)
{}
