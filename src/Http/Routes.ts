import { Layer } from "effect"
import { HttpRouter } from "effect/http"
import { HttpApi } from "effect/http-api"
import { PetStoreApi } from "../Api.js"
import { documentRoutes } from "../Api/DocumentPaths.js"

/**
 * The router matches paths as declared: the platform's router otherwise ignores case, a trailing
 * slash and doubled slashes, so `/V1/PETS` or `//docs` would slip past a proxy's path rules.
 */
export const ExactRoutes = Layer.succeed(HttpRouter.RouterConfig, {
  caseSensitive: true,
  ignoreTrailingSlash: false,
  ignoreDuplicateSlashes: false
})

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
 * the API definition, then the documents served beside them. Read once, at start.
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

/** A route's path as a template (`/v1/pets/{petId}`), the form logs, metrics and spans name it by. */
const templateOf = (path: string): string => path.replace(/:(\w+)/g, "{$1}")

/**
 * The route table, for the log's, the metrics' and `Allow`'s purposes: a path's value for each
 * method that route answers (`valueOf(method, template, statuses)`, made once per route), found by a map
 * lookup for a fixed path, else by a pattern test for each path with a parameter. The router
 * matches the same routes on its own; the table only names what it matched.
 */
export const makeRouteTable = <A>(valueOf: (method: string, template: string, statuses: ReadonlyArray<number>) => A) => {
  const fixed = new Map<string, Map<string, A>>()
  const withParams: Array<{ readonly pattern: RegExp; readonly byMethod: Map<string, A> }> = []
  for (const { method, path, statuses } of routes) {
    const template = templateOf(path)
    let byMethod: Map<string, A> | undefined
    if (template === path) {
      byMethod = fixed.get(path) ?? new Map()
      fixed.set(path, byMethod)
    } else {
      const source = `^${path.replace(/:\w+/g, "[^/]+")}$`
      byMethod = withParams.find(({ pattern }) => pattern.source === source)?.byMethod
      if (byMethod === undefined) {
        byMethod = new Map()
        withParams.push({ pattern: new RegExp(source), byMethod })
      }
    }
    byMethod.set(method, valueOf(method, template, statuses))
  }
  /** The route a canonical path (no query) is, by method; `undefined` when no route has that path. */
  return (path: string): ReadonlyMap<string, A> | undefined => {
    const byMethod = fixed.get(path)
    if (byMethod !== undefined) return byMethod
    for (let i = 0; i < withParams.length; i++) {
      if (withParams[i]!.pattern.test(path)) return withParams[i]!.byMethod
    }
    return undefined
  }
}

/** For a path no route matched with its method: the methods that path does answer (for 405 and `Allow`). */
export const makeAllowedMethods = () => {
  const find = makeRouteTable(() => undefined)
  return (path: string): ReadonlyArray<string> => [...(find(path)?.keys() ?? [])]
}
