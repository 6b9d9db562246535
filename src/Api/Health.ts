import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { errorBodies } from "../Domain/ApiError.js"

export const Health = Schema.Struct({
  status: Schema.Literal("ok").annotate({ description: "Always `ok` when the probe succeeds.", examples: ["ok"] })
}).annotate({ identifier: "Health", description: "A successful probe." })

export const Readiness = Schema.Struct({
  status: Schema.Literal("ok").annotate({ description: "Always `ok`: the instance serves.", examples: ["ok"] }),
  database: Schema.Literals(["ready", "unavailable", "read_only"]).annotate({
    description: "The database's state: `ready`; `unavailable` (down, hung, out of connections or locked: requests " +
      "using it are answered 503 database_unavailable); `read_only` (a standby, or writes turned off: reads are " +
      "served, creates answered 503 database_read_only).",
    examples: ["ready"]
  })
}).annotate({ identifier: "Readiness", description: "The instance is ready; the database's own state beside it." })

/** Probes for process supervisors and load balancers; they need no API key. */
export class HealthApi extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("livez", "/livez", { success: Health, error: errorBodies.InternalError })
      .annotate(OpenApi.Summary, "Liveness")
      .annotate(OpenApi.Description, "Answers 200 while the process serves requests.")
  )
  .add(
    HttpApiEndpoint.get("readyz", "/readyz", {
      success: Readiness,
      error: [errorBodies.ServiceUnavailable, errorBodies.InternalError]
    })
      .annotate(OpenApi.Summary, "Readiness")
      .annotate(
        OpenApi.Description,
        "Whether a load balancer should send this instance requests. Answers 503 only for what is this instance's " +
          "alone: stopping (shutting_down), or its SQLite file deleted, replaced or damaged (database_unavailable); " +
          "while starting it does not listen yet. A fault of the database every instance shares (down, hung, out of " +
          "connections, locked, read-only) answers 200 naming it in `database`: taking every instance out would help " +
          "no client, and the instance answers those requests itself (503 database_unavailable or database_read_only, " +
          "with Retry-After)."
      )
  )
  .annotate(OpenApi.Description, "Health probes, without authentication.")
{}
