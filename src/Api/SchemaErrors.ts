import { HttpApiMiddleware } from "effect/http-api"
import { errorBodies } from "../Domain/ApiError.js"

/** HttpApi's own schema failures as the Error body, never its empty 400 (`SchemaErrorsLive`). */
export class SchemaErrors extends HttpApiMiddleware.Service<SchemaErrors>()("SchemaErrors", {
  error: [errorBodies.BadRequest, errorBodies.InternalError]
}) {}
