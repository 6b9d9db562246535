import { HttpApi, OpenApi } from "effect/http-api"
import { HealthApi } from "./Api/Health.js"
import { finishDocument } from "./Api/OpenApiDocument.js"
import { PetsApi } from "./Api/Pets.js"

/** The one definition the server, client, OpenAPI document and tests derive from; it imports no server code. */
export class PetStoreApi extends HttpApi.make("petstore")
  .add(PetsApi)
  .add(HealthApi)
  .annotate(OpenApi.Title, "Pet Store")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(OpenApi.Description, "A catalogue of animals held in a store.")
  .annotate(OpenApi.License, { name: "Proprietary" })
  .annotate(OpenApi.Transform, finishDocument)
{}
