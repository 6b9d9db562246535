/**
 * The benchmark's framework floor: an Effect HttpApi server with the service's `GET /v1/pets/{petId}`
 * path and schemas whose handler returns a fixed pet under the requested id. No authentication, no database, no
 * middleware: what Effect's HttpApi and router and the service's Bun adapter (`src/Http/BunServer.ts`)
 * cost per request on their own, on the service's server settings (request tracer and request
 * log off).
 * Usage: bun scripts/bench/floor.ts <port>
 */
import { Effect, Layer } from "effect"
import { HttpMiddleware, HttpRouter, HttpServer } from "effect/http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { GetPetPath } from "../../src/Api/Pets.js"
import { Pet } from "../../src/Domain/Pet.js"
import * as BunServer from "../../src/Http/BunServer.js"

const FloorApi = HttpApi.make("floor").add(
  HttpApiGroup.make("pets").add(HttpApiEndpoint.get("getPet", "/pets/:petId", { params: GetPetPath, success: Pet }))
).prefix("/v1")

const PetsLive = HttpApiBuilder.group(FloorApi, "pets", (handlers) =>
  handlers.handle("getPet", ({ params: { petId } }) =>
    Effect.succeed({ id: petId, name: "Rex", categoryId: 7, status: "available" as const })))

const port = Number(process.argv[2])

const FloorLive = HttpRouter.serve(HttpApiBuilder.layer(FloorApi), { disableLogger: true, disableListenLog: true }).pipe(
  Layer.provide(PetsLive),
  // What HttpApi asks of a platform for files and ETags, which the floor does not use.
  Layer.provide(HttpServer.layerServices),
  Layer.provide(Layer.succeed(HttpMiddleware.TracerDisabledWhen)(() => true)),
  Layer.provide(BunServer.layer({ port, hostname: "127.0.0.1" }))
)

// Serves until the process is ended (the benchmark sends SIGTERM).
Effect.runPromise(Layer.launch(FloorLive)).catch((error) => {
  console.error(error)
  process.exit(1)
})
