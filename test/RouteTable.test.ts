import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { HttpRouter } from "effect/http"
import { ApiKeys } from "../src/Auth/ApiKeys.js"
import { RateLimiter } from "../src/Auth/RateLimiter.js"
import { AppConfig } from "../src/Config/AppConfig.js"
import { InFlightRequests } from "../src/Http/InFlightRequests.js"
import { makeAllowedMethods, routes } from "../src/Http/Routes.js"
import { methodLabel } from "../src/Http/RouteTemplates.js"
import { AppLive } from "../src/Http/Server.js"
import { ObservabilityConfig } from "../src/Observability/ObservabilityConfig.js"
import { Cursors } from "../src/Pets/Cursors.js"
import { PetRepository } from "../src/Pets/PetRepository.js"
import { createKey, makeTestServer, send } from "./support/TestServer.js"
import { waitForEffect } from "./support/WaitFor.js"

/** The router, noting every route added to it (the router itself lists none). */
const recordingRouter = (registered: Array<{ readonly method: string; readonly path: string }>) =>
  Layer.effect(
    HttpRouter.HttpRouter,
    Effect.map(HttpRouter.make, (router) => {
      const recording = (inner: HttpRouter.HttpRouter): HttpRouter.HttpRouter =>
        HttpRouter.HttpRouter.of({
          ...inner,
          prefixed: (prefix) => recording(inner.prefixed(prefix)),
          add: (method, path, handler, options) => {
            registered.push({ method, path })
            return inner.add(method, path, handler, options)
          },
          addAll: (routes) => {
            for (const { method, path } of routes) registered.push({ method, path })
            return inner.addAll(routes)
          }
        })
      return recording(router)
    })
  )

/** The routes the router holds once the service is built: the API's and whatever else registers one. */
const registeredRoutes = Effect.suspend(() => {
  const registered: Array<{ readonly method: string; readonly path: string }> = []
  return Effect.as(
    Layer.build(
      AppLive.pipe(
        Layer.provide(recordingRouter(registered)),
        Layer.provide(
          Layer.mergeAll(PetRepository.InMemory, ApiKeys.InMemory, Cursors.InMemory, RateLimiter.InMemory).pipe(
            Layer.provideMerge(Layer.mergeAll(AppConfig.make(), ObservabilityConfig.make(), InFlightRequests.layer))
          )
        )
      )
    ),
    registered
  )
})

describe("routes, read from the API definition", () => {
  it.effect("holds exactly the routes the router serves, so no route is declared anywhere else", () =>
    Effect.gen(function*() {
      const registered = yield* Effect.scoped(registeredRoutes)
      const key = ({ method, path }: { readonly method: string; readonly path: string }) => `${method} ${path}`
      expect(routes.map(key).sort()).toEqual(registered.map(key).sort())
    }))

  it.effect("names each request by the route the router matched, and one it matched none `unmatched`", () => {
    const lines: Array<string> = []
    return Effect.gen(function*() {
      const { key } = yield* createKey()
      const sent = [
        yield* send("GET", "/v1/pets/42?x=1", { key }),
        yield* send("POST", "/v1/pets", { key, body: `{"name":"Rex","categoryId":3}` }),
        yield* send("HEAD", "/docs"),
        yield* send("GET", "/readyz"),
        yield* send("DELETE", "/v1/pets/42", { key }),
        yield* send("GET", "/v1/pets;x", { key })
      ]
      expect(sent.map(({ status }) => status)).toEqual([404, 201, 200, 200, 405, 404])
      // The log's lines are written in batches, within 50 ms.
      yield* waitForEffect(Effect.sync(() => lines.join("").includes(`"path":"/v1/pets;x"`)), {
        what: "the last request's log line"
      })
      const logged = lines.join("").trim().split("\n").map((line) => JSON.parse(line).annotations)
      expect(logged.map(({ method, route }) => `${method} ${route}`)).toEqual([
        "GET /v1/pets/{petId}",
        "POST /v1/pets",
        "HEAD /docs",
        "GET /readyz",
        "DELETE unmatched",
        "GET unmatched"
      ])
      // A method no convention names is labelled `_OTHER`, so a caller cannot add label values.
      expect([methodLabel("BREW"), methodLabel("GET")]).toEqual(["_OTHER", "GET"])
    }).pipe(Effect.provide(makeTestServer(undefined, {}, undefined, {}, (chunk) => lines.push(chunk))))
  })

  it("answers the methods a path allows from the same routes, matched as the router matches them", () => {
    const allowed = makeAllowedMethods()
    expect(allowed("/v1/pets")).toEqual(["GET", "POST"])
    expect(allowed("/v1/pets/7")).toEqual(["GET"])
    expect(allowed("/v1/openapi.json")).toEqual(["GET"])
    expect(allowed("/")).toEqual(["GET"])
    expect(allowed("/v1/nothing")).toEqual([])
  })
})
