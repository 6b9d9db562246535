import { HttpApi } from "@effect/platform"
import { Metric, MetricLabel } from "effect"
import { PetStoreApi } from "../Api.js"
import { docsPath, openApiPath, rootPath } from "../Api/DocumentPaths.js"
import { requestDuration } from "../Observability/Metrics.js"
import { isCanonicalPath, pathOf } from "./Routes.js"

/** What a request is labelled with: its method and route template, and its duration series by status. */
export interface RouteLabels {
  readonly method: string
  /** `/v1/pets/{petId}`; `unmatched` for every request no route matched. */
  readonly route: string
  /** The server span's name: `GET /v1/pets/{petId}`, or the method alone when no route matched. */
  readonly spanName: string
  readonly durationFor: (status: number) => Metric.Metric.Histogram<number>
}

export const unmatchedRoute = "unmatched"

/** The methods the semantic conventions name; any other is `_OTHER`, so a caller cannot add label values. */
const knownMethods = new Set(["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"])

const makeLabels = (method: string, route: string): RouteLabels => {
  const byStatus = new Map<number, Metric.Metric.Histogram<number>>()
  return {
    method,
    route,
    spanName: route === unmatchedRoute ? method : `${method} ${route}`,
    durationFor: (status) => {
      let metric = byStatus.get(status)
      if (metric === undefined) {
        metric = Metric.taggedWithLabels(requestDuration, [
          MetricLabel.make("http_request_method", method),
          MetricLabel.make("http_route", route),
          MetricLabel.make("http_response_status_code", String(status))
        ])
        byStatus.set(status, metric)
      }
      return metric
    }
  }
}

/**
 * Finds a request's route template among the API's endpoints and the documents served beside
 * them, with label sets made once per route: a map lookup for fixed paths, a pattern test for the
 * one path with a parameter.
 */
export const makeRouteLabels = () => {
  const fixed = new Map<string, Map<string, RouteLabels>>()
  const withParams: Array<{ readonly pattern: RegExp; readonly byMethod: Map<string, RouteLabels> }> = []
  const add = (method: string, path: string) => {
    const template = path.replace(/:(\w+)/g, "{$1}")
    let byMethod: Map<string, RouteLabels> | undefined
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
    byMethod.set(method, makeLabels(method, template))
  }
  HttpApi.reflect(PetStoreApi, { onGroup: () => {}, onEndpoint: ({ endpoint }) => add(endpoint.method, endpoint.path) })
  add("GET", openApiPath)
  add("GET", docsPath)
  add("GET", rootPath)
  const unmatched = new Map<string, RouteLabels>()
  const unmatchedFor = (method: string) => {
    const name = knownMethods.has(method) ? method : "_OTHER"
    let labels = unmatched.get(name)
    if (labels === undefined) {
      labels = makeLabels(name, unmatchedRoute)
      unmatched.set(name, labels)
    }
    return labels
  }
  const inMethods = (byMethod: Map<string, RouteLabels> | undefined, method: string) =>
    byMethod === undefined ? undefined : byMethod.get(method) ?? (method === "HEAD" ? headOf(byMethod) : undefined)
  const headed = new Map<RouteLabels, RouteLabels>()
  // The router answers HEAD with the GET route; the label keeps the method that was sent.
  const headOf = (byMethod: Map<string, RouteLabels>) => {
    const get = byMethod.get("GET")
    if (get === undefined) return undefined
    let head = headed.get(get)
    if (head === undefined) {
      head = makeLabels("HEAD", get.route)
      headed.set(get, head)
    }
    return head
  }
  return (method: string, url: string): RouteLabels => {
    // Other spellings of a route (`/v1/pets;x`) are answered 404, as no route.
    if (!isCanonicalPath(url)) return unmatchedFor(method)
    const path = pathOf(url)
    let labels = inMethods(fixed.get(path), method)
    for (let i = 0; labels === undefined && i < withParams.length; i++) {
      if (withParams[i]!.pattern.test(path)) labels = inMethods(withParams[i]!.byMethod, method)
    }
    return labels ?? unmatchedFor(method)
  }
}
