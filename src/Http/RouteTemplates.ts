import type { HttpRouter } from "effect/http"
import { requestDurationOf } from "../Observability/Metrics.js"
import { routes } from "./Routes.js"

/** What a request is labelled with: its method and route template, and its duration series by status. */
export interface RouteLabels {
  readonly method: string
  /** `/v1/pets/{petId}`; `unmatched` for every request no route matched. */
  readonly route: string
  /** Records the request's duration in seconds, in its series for `status`. */
  readonly recordDuration: (status: number, seconds: number) => void
}

export const unmatchedRoute = "unmatched"

/** The methods the semantic conventions name; any other is `_OTHER`, so a caller cannot add label values. */
const knownMethods = new Set(["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"])

/** A request's method as its labels and span name it. */
export const methodLabel = (method: string): string => knownMethods.has(method) ? method : "_OTHER"

/** A route's path as the router holds it (`/v1/pets/:petId`), as a template (`/v1/pets/{petId}`). */
export const templateOf = (path: string): string => path.replace(/:(\w+)/g, "{$1}")

/** With `exported`, the series of each status the route declares are made now, so they are exported at 0. */
const makeLabels = (method: string, route: string, statuses: ReadonlyArray<number>, exported: boolean): RouteLabels => {
  // At most one series per HTTP status code the service answers (a few dozen).
  const byStatus = new Map<number, (seconds: number) => void>()
  if (exported) for (const status of statuses) byStatus.set(status, requestDurationOf(method, route, status))
  return {
    method,
    route,
    recordDuration: (status, seconds) => {
      let record = byStatus.get(status)
      if (record === undefined) {
        record = requestDurationOf(method, route, status)
        byStatus.set(status, record)
      }
      record(seconds)
    }
  }
}

/**
 * A request's labels, from its method and the route the router matched for it (`RouteContext`,
 * noted on its record by `RouteNoted`; none for a request no route matched), made once per method
 * and route. With `exported` (metrics on), each route's series for the statuses its endpoint
 * declares are exported at 0 from the start, so an alert on their rate sees the first request.
 */
export const makeRouteLabels = (exported = false) => {
  // One entry per route and method it is asked with (its own, or HEAD for a GET), and per method
  // with no route: bounded by the routes and the known methods.
  const made = new Map<string, RouteLabels>()
  const labels = (method: string, route: string, statuses: ReadonlyArray<number> = []) => {
    const key = `${method} ${route}`
    let found = made.get(key)
    if (found === undefined) {
      found = makeLabels(method, route, statuses, exported)
      made.set(key, found)
    }
    return found
  }
  if (exported) for (const { method, path, statuses } of routes) labels(method, templateOf(path), statuses)
  // The router's routes, made once at start: a few dozen entries.
  const byRoute = new Map<HttpRouter.Route<any, any>, RouteLabels>()
  return (method: string, route: HttpRouter.Route<any, any> | undefined): RouteLabels => {
    if (route === undefined) return labels(methodLabel(method), unmatchedRoute)
    // The router answers HEAD with the GET route; the label keeps the method that was sent.
    if (route.method !== method) return labels(method, templateOf(route.path))
    let found = byRoute.get(route)
    if (found === undefined) {
      found = labels(method, templateOf(route.path))
      byRoute.set(route, found)
    }
    return found
  }
}
