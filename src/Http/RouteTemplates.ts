import { requestDurationOf } from "../Observability/Metrics.js"
import { isCanonicalPath, makeRouteTable, pathOf } from "./Routes.js"

/** What a request is labelled with: its method and route template, and its duration series by status. */
export interface RouteLabels {
  readonly method: string
  /** `/v1/pets/{petId}`; `unmatched` for every request no route matched. */
  readonly route: string
  /** The server span's name: `GET /v1/pets/{petId}`, or the method alone when no route matched. */
  readonly spanName: string
  /** Records the request's duration in seconds, in its series for `status`. */
  readonly recordDuration: (status: number, seconds: number) => void
}

export const unmatchedRoute = "unmatched"

/** The methods the semantic conventions name; any other is `_OTHER`, so a caller cannot add label values. */
const knownMethods = new Set(["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"])

/** With `exported`, the series of each status the route declares are made now, so they are exported at 0. */
const makeLabels = (method: string, route: string, statuses: ReadonlyArray<number>, exported: boolean): RouteLabels => {
  // At most one series per HTTP status code the service answers (a few dozen).
  const byStatus = new Map<number, (seconds: number) => void>()
  if (exported) for (const status of statuses) byStatus.set(status, requestDurationOf(method, route, status))
  return {
    method,
    route,
    spanName: route === unmatchedRoute ? method : `${method} ${route}`,
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
 * Finds a request's route template in the route table (`Routes.ts`), with label sets made once
 * per route. With `exported` (metrics on), each route's series for the statuses its endpoint
 * declares are exported at 0 from the start, so an alert on their rate sees the first request.
 */
export const makeRouteLabels = (exported = false) => {
  const find = makeRouteTable((method, route, statuses) => makeLabels(method, route, statuses, exported))
  // One entry per known method and `_OTHER`: ten at most.
  const unmatched = new Map<string, RouteLabels>()
  const unmatchedFor = (method: string) => {
    const name = knownMethods.has(method) ? method : "_OTHER"
    let labels = unmatched.get(name)
    if (labels === undefined) {
      labels = makeLabels(name, unmatchedRoute, [], false)
      unmatched.set(name, labels)
    }
    return labels
  }
  // One entry per route that has a GET: bounded by the route table.
  const headed = new Map<RouteLabels, RouteLabels>()
  // The router answers HEAD with the GET route; the label keeps the method that was sent.
  const headOf = (byMethod: ReadonlyMap<string, RouteLabels>) => {
    const get = byMethod.get("GET")
    if (get === undefined) return undefined
    let head = headed.get(get)
    if (head === undefined) {
      head = makeLabels("HEAD", get.route, [], false)
      headed.set(get, head)
    }
    return head
  }
  return (method: string, url: string): RouteLabels => {
    // Other spellings of a route (`/v1/pets;x`) are answered 404, as no route.
    if (!isCanonicalPath(url)) return unmatchedFor(method)
    const byMethod = find(pathOf(url))
    const labels = byMethod === undefined
      ? undefined
      : byMethod.get(method) ?? (method === "HEAD" ? headOf(byMethod) : undefined)
    return labels ?? unmatchedFor(method)
  }
}
