import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { ServiceUnavailableBody } from "../Domain/ApiError.js"

export const Health = Schema.Struct({
  status: Schema.Literal("ok").annotations({ description: "Always `ok` when the probe succeeds.", examples: ["ok"] })
}).annotations({ identifier: "Health", description: "A successful probe." })

/** Probes for process supervisors and load balancers; they need no API key. */
export class HealthApi extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("livez", "/livez")
      .addSuccess(Health)
      .annotate(OpenApi.Summary, "Liveness")
      .annotate(OpenApi.Description, "Answers 200 while the process serves requests.")
  )
  .add(
    HttpApiEndpoint.get("readyz", "/readyz")
      .addSuccess(Health)
      .addError(ServiceUnavailableBody)
      .annotate(OpenApi.Summary, "Readiness")
      .annotate(OpenApi.Description, "Answers 200 when the database answers, 503 when it cannot.")
  )
  .annotate(OpenApi.Description, "Health probes, without authentication.")
{}
