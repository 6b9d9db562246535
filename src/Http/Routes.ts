import { HttpApi, HttpRouter } from "@effect/platform"
import { PetStoreApi } from "../Api.js"
import { docsPath, openApiPath, rootPath } from "../Api/DocumentPaths.js"

const extraRoutes = [
  { method: "GET", path: openApiPath },
  { method: "GET", path: docsPath },
  { method: "GET", path: rootPath }
] as const

/**
 * The router matches paths as declared: the platform's router otherwise ignores case, a trailing
 * slash and doubled slashes, so `/V1/PETS` or `//docs` would slip past a proxy's path rules.
 */
export const ExactRoutes = HttpRouter.setRouterConfig({
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

/** For a path no route matched with its method: the methods that path does answer (for 405 and `Allow`). */
export const makeAllowedMethods = () => {
  const routes: Array<{ readonly method: string; readonly pattern: RegExp }> = []
  const add = (method: string, path: string) =>
    routes.push({ method, pattern: new RegExp(`^${path.replace(/:\w+/g, "[^/]+")}$`) })
  HttpApi.reflect(PetStoreApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => add(endpoint.method, endpoint.path)
  })
  extraRoutes.forEach(({ method, path }) => add(method, path))
  return (path: string): ReadonlyArray<string> => [
    ...new Set(routes.filter(({ pattern }) => pattern.test(path)).map(({ method }) => method))
  ]
}
