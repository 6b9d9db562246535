import { HttpServerResponse } from "@effect/platform"
import type { RequestState } from "../Request/CurrentRequest.js"

/**
 * The headers every response leaves with, whoever wrote it (a handler, HttpApi's encoding of an
 * error, `ApiResponses`, the deadline or a draining server): the request's `X-Request-Id`,
 * `Cache-Control: no-store` unless the response set its own (only the docs page and the
 * document do, `Http/Docs.ts`), `X-Content-Type-Options: nosniff`, and the headers noted on the
 * request's record (rate limits, a 401's challenge, getPet's deprecation, a read-only store's
 * `Retry-After`). Answers are about one caller at one moment: never cached, never sniffed as
 * another type.
 */
export const withResponseHeaders = (state: RequestState) => (response: HttpServerResponse.HttpServerResponse) =>
  HttpServerResponse.setHeaders(response, {
    "x-request-id": state.id,
    "cache-control": response.headers["cache-control"] ?? "no-store",
    "x-content-type-options": "nosniff",
    ...state.responseHeaders
  })
