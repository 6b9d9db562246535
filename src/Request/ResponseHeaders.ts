import type { HttpServerRequest } from "@effect/platform"

/**
 * Headers that middleware decided for the response of a request being served (rate limits, an
 * endpoint's deprecation), added as the response leaves the API (`Http/ApiResponses.ts`), errors
 * included. Kept beside the request: a response hook per request would cost a fiber reference
 * write and an effect run at every response.
 */
const noted = new WeakMap<HttpServerRequest.HttpServerRequest, Record<string, string>>()

export const noteResponseHeaders = (request: HttpServerRequest.HttpServerRequest, headers: Record<string, string>) => {
  const earlier = noted.get(request)
  noted.set(request, earlier === undefined ? headers : { ...earlier, ...headers })
}

export const notedResponseHeaders = (request: HttpServerRequest.HttpServerRequest): Record<string, string> | undefined =>
  noted.get(request)
