import { Layer } from "effect"
import { FindMyWay, HttpRouter } from "effect/http"
import { HttpApi } from "effect/http-api"
import { PetStoreApi } from "../Api.js"
import { documentRoutes } from "../Api/DocumentPaths.js"

/**
 * The router matches paths as declared: the platform's router otherwise ignores case, a trailing
 * slash and doubled slashes, so `/V1/PETS` or `//docs` would slip past a proxy's path rules.
 */
const exactRoutes = { caseSensitive: true, ignoreTrailingSlash: false, ignoreDuplicateSlashes: false }

export const ExactRoutes = Layer.succeed(HttpRouter.RouterConfig, exactRoutes)

/**
 * Whether a request target's path is spelled the one way a route can declare it: segments of
 * path characters, no empty segment, no trailing slash. The router would otherwise end the path
 * at `;` and decode percent-escapes, so `/v1/pets;x` and `/v1/%70ets` would be `/v1/pets`.
 */
export const isCanonicalPath = (url: string): boolean => canonicalPath.test(url)

// RFC 3986's path characters but `;` and `%`.
const canonicalPath = /^(?:\/|(?:\/[\w.~!$&'()*+,=:@-]+)+)(?:\?|$)/

/** The path of a request target, as sent (`new URL` would read `//v1` as a host). */
export const pathOf = (url: string): string => {
  const queryAt = url.indexOf("?")
  return queryAt === -1 ? url : url.slice(0, queryAt)
}

/** A route the service answers: its method, its path in the router's syntax, and the statuses its endpoint declares. */
export interface Route {
  readonly method: string
  readonly path: string
  /** The success and error statuses of the API definition's endpoint; none for the documents. */
  readonly statuses: ReadonlyArray<number>
}

/**
 * Every route the service answers, in the router's syntax (`/v1/pets/:petId`): the endpoints of
 * the API definition, then the documents served beside them. Read once, at start, for what is known
 * before any request: each route's series exported at 0, and `Allow`.
 */
export const routes: ReadonlyArray<Route> = (() => {
  const found: Array<Route> = []
  HttpApi.reflect(PetStoreApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, errors, successes }) =>
      found.push({ method: endpoint.method, path: endpoint.path, statuses: [...successes.keys(), ...errors.keys()] })
  })
  return [...found, ...documentRoutes.map((route) => ({ ...route, statuses: [] }))]
})()

/**
 * For a path no route matched with its method: the methods that path does answer (for 405 and
 * `Allow`), asked of the platform's route matcher holding the routes above, matching as the
 * router does (`ExactRoutes`).
 */
export const makeAllowedMethods = () => {
  const matcher = FindMyWay.make<true>(exactRoutes)
  for (const { method, path } of routes) matcher.on(method, path as FindMyWay.PathInput, true)
  return (path: string): ReadonlyArray<string> =>
    routeMethods.filter((method) => matcher.find(method, path) !== undefined)
}

/** Every method some route answers: what `Allow` may name, and what CORS lets a browser send. */
export const routeMethods: ReadonlyArray<string> = [...new Set(routes.map(({ method }) => method))]
