import { HttpApiMiddleware } from "effect/http-api"
import { BadRequestBody, InternalErrorBody } from "../Domain/ApiError.js"

/**
 * What becomes of HttpApi's own schema failures: a request it cannot decode (a path or query
 * parameter, a header, the body) answers 400 with the interface's Error body, never HttpApi's
 * empty 400, and a response it cannot encode answers 500. The server provides it with
 * `HttpApiMiddleware.layerSchemaErrorTransform`.
 */
export class SchemaErrors extends HttpApiMiddleware.Service<SchemaErrors>()("SchemaErrors", {
  error: [BadRequestBody, InternalErrorBody]
}) {}
