import { HttpServerResponse } from "effect/http"
import type { RequestRecord } from "../Request/CurrentRequest.js"

/**
 * The headers every response leaves with, whoever wrote it: `X-Request-Id`, `no-store` unless it
 * set its own (`Http/Docs.ts`) and `nosniff` (an answer is for one caller at one moment). Those
 * the request noted (`noteResponseHeaders`) are set over them as it is sent.
 */
export const withResponseHeaders = (record: RequestRecord) => (response: HttpServerResponse.HttpServerResponse) =>
  HttpServerResponse.setHeaders(response, {
    "x-request-id": record.id,
    "cache-control": response.headers["cache-control"] ?? "no-store",
    "x-content-type-options": "nosniff"
  })
