import type { HttpRouter } from "effect/http"
import { requestDurationOf } from "../Observability/Metrics.js"
import { routes } from "./Routes.js"

type RouteLabels = { readonly route: string; readonly recordDuration: (status: number, seconds: number) => void }

export const unmatchedRoute = "unmatched"

/** The methods the semantic conventions name; any other is `_OTHER`, so a caller cannot add label values. */
const knownMethods = new Set(["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"])

export const methodLabel = (method: string): string => knownMethods.has(method) ? method : "_OTHER"

/** A route's path as the router holds it (`/v1/pets/:petId`), as a template (`/v1/pets/{petId}`). */
const templateOf = (path: string): string => path.replace(/:(\w+)/g, "{$1}")

/** A request's labels by method and matched route, made once; with `exported`, declared statuses at 0 from start. */
export const makeRouteLabels = (exported = false) => {
  // Per route and method (HEAD for a GET too), and per method with no route: a few dozen.
  const made = new Map<string, RouteLabels>()
  const labels = (method: string, route: string, statuses: ReadonlyArray<number> = []) => {
    const key = `${method} ${route}`
    const found = made.get(key)
    if (found !== undefined) return found
    const byStatus = new Map(statuses.map((status) => [status, requestDurationOf(method, route, status)]))
    const recordDuration = (status: number, seconds: number) => {
      let record = byStatus.get(status)
      if (record === undefined) byStatus.set(status, record = requestDurationOf(method, route, status))
      record(seconds)
    }
    const routeLabels = { route, recordDuration }
    made.set(key, routeLabels)
    return routeLabels
  }
  if (exported) { for (const { method, path, statuses } of routes) labels(method, templateOf(path), statuses) }
  const byRoute = new Map<HttpRouter.Route<any, any>, RouteLabels>()
  return (method: string, route: HttpRouter.Route<any, any> | undefined): RouteLabels => {
    if (route === undefined) return labels(methodLabel(method), unmatchedRoute)
    // The router answers HEAD with the GET route; the label keeps the method that was sent.
    if (route.method !== method) return labels(method, templateOf(route.path))
    let found = byRoute.get(route)
    if (found === undefined) byRoute.set(route, found = labels(method, templateOf(route.path)))
    return found
  }
}
