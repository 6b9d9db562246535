/**
 * The benchmark's framework floor: an Effect HttpApi server with the service's `GET /v1/pets/{petId}`
 * path and schemas whose handler returns a fixed pet under the requested id. No authentication, no database, no
 * middleware: what Effect, @effect/platform and the Bun adapter cost per request on their own, on
 * the service's server settings (request tracer off, production mode).
 * Usage: bun scripts/bench/floor.ts <port>
 */
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup, HttpMiddleware } from "@effect/platform"
import { BunHttpServer, BunRuntime } from "@effect/platform-bun"
import { Effect, Layer } from "effect"
import { Pet } from "../../src/Domain/Pet.js"
import { GetPetPath } from "../../src/Api/Pets.js"

const FloorApi = HttpApi.make("floor").add(
  HttpApiGroup.make("pets").add(HttpApiEndpoint.get("getPet", "/pets/:petId").setPath(GetPetPath).addSuccess(Pet))
).prefix("/v1")

const PetsLive = HttpApiBuilder.group(FloorApi, "pets", (handlers) =>
  handlers.handle("getPet", ({ path: { petId } }) =>
    Effect.succeed({ id: petId, name: "Rex", categoryId: 7, status: "available" as const })))

const port = Number(process.argv[2])

HttpApiBuilder.serve().pipe(
  Layer.provide(HttpApiBuilder.api(FloorApi).pipe(Layer.provide(PetsLive))),
  HttpMiddleware.withTracerDisabledWhen(() => true),
  Layer.provide(BunHttpServer.layer({ port, hostname: "127.0.0.1", development: false })),
  Layer.launch,
  BunRuntime.runMain
)
