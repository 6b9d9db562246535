import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { InternalErrorBody, ServiceUnavailableBody } from "../Domain/ApiError.js"

export const Health = Schema.Struct({
  status: Schema.Literal("ok").annotate({ description: "Always `ok` when the probe succeeds.", examples: ["ok"] })
}).annotate({ identifier: "Health", description: "A successful probe." })

/** Probes for process supervisors and load balancers; they need no API key. */
export class HealthApi extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("livez", "/livez", { success: Health, error: InternalErrorBody })
      .annotate(OpenApi.Summary, "Liveness")
      .annotate(OpenApi.Description, "Answers 200 while the process serves requests.")
  )
  .add(
    HttpApiEndpoint.get("readyz", "/readyz", { success: Health, error: [ServiceUnavailableBody, InternalErrorBody] })
      .annotate(OpenApi.Summary, "Readiness")
      .annotate(OpenApi.Description, "Answers 200 when the database answers and takes writes, 503 when it does not answer " +
        "(database_unavailable) or is read-only (database_read_only: a standby, or writes turned off).")
  )
  .annotate(OpenApi.Description, "Health probes, without authentication.")
{}
