import { Layer } from "effect"
import { FindMyWay, HttpRouter } from "effect/http"
import { HttpApi } from "effect/http-api"
import { PetStoreApi } from "../Api.js"
import { documentRoutes } from "../Api/DocumentPaths.js"

/** Paths matched as declared: else `/V1/PETS` or `//docs` would slip past a proxy's path rules. */
const exactRoutes = { caseSensitive: true, ignoreTrailingSlash: false, ignoreDuplicateSlashes: false }

export const ExactRoutes = Layer.succeed(HttpRouter.RouterConfig, exactRoutes)

/** Whether a path is spelled as a route declares it: the router reads `/v1/pets;x` and `/v1/%70ets` as `/v1/pets`. */
export const isCanonicalPath = (url: string): boolean => canonicalPath.test(url)

// RFC 3986's path characters but `;` and `%`.
const canonicalPath = /^(?:\/|(?:\/[\w.~!$&'()*+,=:@-]+)+)(?:\?|$)/

/** The path of a request target, as sent (`new URL` would read `//v1` as a host). */
export const pathOf = (url: string): string => url.split("?", 1)[0]!

const apiRoutes: Array<{ method: string; path: string; statuses: ReadonlyArray<number> }> = []
HttpApi.reflect(PetStoreApi, {
  onGroup: () => {},
  onEndpoint: ({ endpoint, errors, successes }) =>
    apiRoutes.push({ method: endpoint.method, path: endpoint.path, statuses: [...successes.keys(), ...errors.keys()] })
})

/** Every route (its path in the router's syntax, its statuses): the API's endpoints, then the documents. */
export const routes = [...apiRoutes, ...documentRoutes.map((route) => ({ ...route, statuses: [] }))]

/** The methods a path answers (405's `Allow`), asked of the platform's matcher set as the router (`ExactRoutes`). */
export const makeAllowedMethods = () => {
  const matcher = FindMyWay.make<true>(exactRoutes)
  for (const { method, path } of routes) matcher.on(method, path as FindMyWay.PathInput, true)
  return (path: string): ReadonlyArray<string> =>
    routeMethods.filter((method) => matcher.find(method, path) !== undefined)
}

/** Every method some route answers: what `Allow` may name, and what CORS lets a browser send. */
export const routeMethods: ReadonlyArray<string> = [...new Set(routes.map(({ method }) => method))]
