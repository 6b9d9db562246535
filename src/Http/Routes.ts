import { HttpApi } from "@effect/platform"
import { PetStoreApi } from "../Api.js"

/** Where the OpenAPI document and the interactive docs page are served, beside the API. */
export const openApiPath = "/v1/openapi.json"
export const docsPath = "/docs"
/** Redirects to the docs page. */
export const rootPath = "/"

const extraRoutes = [
  { method: "GET", path: openApiPath },
  { method: "GET", path: docsPath },
  { method: "GET", path: rootPath }
] as const

/** For a path no route matched with its method: the methods that path does answer (for 405 and `Allow`). */
export const makeAllowedMethods = () => {
  const routes: Array<{ readonly method: string; readonly pattern: RegExp }> = []
  const add = (method: string, path: string) =>
    routes.push({ method, pattern: new RegExp(`^${path.replace(/:\w+/g, "[^/]+")}/?$`) })
  HttpApi.reflect(PetStoreApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => add(endpoint.method, endpoint.path)
  })
  extraRoutes.forEach(({ method, path }) => add(method, path))
  return (path: string): ReadonlyArray<string> => [
    ...new Set(routes.filter(({ pattern }) => pattern.test(path)).map(({ method }) => method))
  ]
}
