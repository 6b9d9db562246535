import { HttpServerResponse } from "effect/http"
import type { RequestRecord } from "../Request/CurrentRequest.js"

/**
 * The headers every response leaves with, whoever wrote it (a handler, HttpApi's encoding of an
 * error, `ApiResponses`, the deadline or a draining server): the request's `X-Request-Id`,
 * `Cache-Control: no-store` unless the response set its own (only the docs page and the
 * document do, `Http/Docs.ts`), and `X-Content-Type-Options: nosniff`. Answers are about one
 * caller at one moment: never cached, never sniffed as another type. The headers a request noted
 * for its response (`noteResponseHeaders`) are added with these, over them.
 */
export const withResponseHeaders = (record: RequestRecord) => (response: HttpServerResponse.HttpServerResponse) =>
  HttpServerResponse.setHeaders(response, {
    "x-request-id": record.id,
    "cache-control": response.headers["cache-control"] ?? "no-store",
    "x-content-type-options": "nosniff",
    ...record.notedHeaders
  })
