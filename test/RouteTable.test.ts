import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { HttpRouter } from "effect/http"
import { ApiKeys } from "../src/Auth/ApiKeys.js"
import { RateLimiter } from "../src/Auth/RateLimiter.js"
import { AppConfig } from "../src/Config/AppConfig.js"
import { InFlightRequests } from "../src/Http/InFlightRequests.js"
import { makeRouteLabels } from "../src/Http/RouteTemplates.js"
import { makeAllowedMethods, routes } from "../src/Http/Routes.js"
import { AppLive } from "../src/Http/Server.js"
import { ObservabilityConfig } from "../src/Observability/ObservabilityConfig.js"
import { Cursors } from "../src/Pets/Cursors.js"
import { PetRepository } from "../src/Pets/PetRepository.js"

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

describe("one route table, read from the API definition", () => {
  it.effect("holds exactly the routes the router serves, so no route is declared anywhere else", () =>
    Effect.gen(function*() {
      const registered = yield* Effect.scoped(registeredRoutes)
      const key = ({ method, path }: { readonly method: string; readonly path: string }) => `${method} ${path}`
      expect(routes.map(key).sort()).toEqual(registered.map(key).sort())
    }))

  it("names each request by its route template, and an unknown one `unmatched`", () => {
    const labelsOf = makeRouteLabels()
    const named = (method: string, url: string) => {
      const { method: labelled, route, spanName } = labelsOf(method, url)
      return { labelled, route, spanName }
    }
    expect(named("GET", "/v1/pets/42?x=1")).toEqual({ labelled: "GET", route: "/v1/pets/{petId}", spanName: "GET /v1/pets/{petId}" })
    expect(named("POST", "/v1/pets")).toEqual({ labelled: "POST", route: "/v1/pets", spanName: "POST /v1/pets" })
    expect(named("HEAD", "/docs")).toEqual({ labelled: "HEAD", route: "/docs", spanName: "HEAD /docs" })
    expect(named("GET", "/readyz")).toEqual({ labelled: "GET", route: "/readyz", spanName: "GET /readyz" })
    expect(named("DELETE", "/v1/pets/42").route).toBe("unmatched")
    expect(named("GET", "/v1/pets;x").route).toBe("unmatched")
    expect(named("BREW", "/nowhere")).toEqual({ labelled: "_OTHER", route: "unmatched", spanName: "_OTHER" })
  })

  it("answers the methods a path allows from the same table", () => {
    const allowed = makeAllowedMethods()
    expect(allowed("/v1/pets")).toEqual(["GET", "POST"])
    expect(allowed("/v1/pets/7")).toEqual(["GET"])
    expect(allowed("/v1/openapi.json")).toEqual(["GET"])
    expect(allowed("/")).toEqual(["GET"])
    expect(allowed("/v1/nothing")).toEqual([])
  })
})
