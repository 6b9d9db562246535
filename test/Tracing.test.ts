import { describe, expect, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { join } from "node:path"
import { PetStoreClient } from "../src/Client/PetStoreClient.js"
import { startOtlpReceiver } from "./support/OtlpReceiver.js"
import { freePort, runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"

const callerTraceId = "0af7651916cd43dd8448eb211c80319c"
const callerSpanId = "b7ad6b7169203331"

/** A real server exporting every span at once to a receiving end the test started. */
const startTracedServer = async (folder: string, env: Record<string, string> = {}) => {
  const receiver = startOtlpReceiver()
  const database = { DATABASE_URL: join(folder, "petstore.db") }
  const key = (await runCommand(["src/keys.ts", "create", "--name", "tracing"], database)).stdout.trim().split("\n").at(-1)!
  const server = await startServer({
    ...database,
    METRICS_PORT: "off",
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_BSP_SCHEDULE_DELAY: "20",
    ...env
  })
  return { receiver, key, server, [Symbol.asyncDispose]: async () => {
    await server.stop()
    receiver.stop()
  } }
}

describe("traces over OTLP/HTTP", () => {
  it("a request's server span continues the caller's traceparent, with child spans for authentication, the repository and each SQL statement, and no key anywhere", async () => {
    using folder = temporaryFolder()
    await using traced = await startTracedServer(folder.path, {
      OTEL_SERVICE_NAME: "petstore-under-test",
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment.name=test"
    })
    const { key, receiver, server } = traced
    const created = await fetch(`${server.url}/v1/pets`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "Rex", categoryId: 3 })
    }).then((r) => r.json() as Promise<{ id: number }>)
    const response = await fetch(`${server.url}/v1/pets/${created.id}`, {
      headers: { authorization: `Bearer ${key}`, traceparent: `00-${callerTraceId}-${callerSpanId}-01` }
    })
    expect(response.status).toBe(200)

    const serverSpan = await receiver.waitFor((span) => span.traceId === callerTraceId && span.kind === 2)
    expect(serverSpan.name).toBe("GET /v1/pets/{petId}")
    expect(serverSpan.parentSpanId).toBe(callerSpanId)
    expect(serverSpan.attributes).toMatchObject({
      "http.request.method": "GET",
      "http.route": "/v1/pets/{petId}",
      "http.response.status_code": 200,
      "url.path": `/v1/pets/${created.id}`,
      "client.address": "127.0.0.1"
    })
    expect(serverSpan.resource).toMatchObject({
      "service.name": "petstore-under-test",
      "deployment.environment.name": "test"
    })

    const authentication = await receiver.waitFor((span) => span.name === "authenticate" && span.traceId === callerTraceId)
    expect(authentication.parentSpanId).toBe(serverSpan.spanId)
    const keyLookup = await receiver.waitFor((span) =>
      span.parentSpanId === authentication.spanId && span.attributes["db.collection.name"] === "api_keys"
    )
    expect(keyLookup.attributes).toMatchObject({ "db.system": "sqlite", "db.operation.name": "SELECT" })
    expect(keyLookup.attributes["db.query.text"]).toContain("?")

    const repository = await receiver.waitFor((span) =>
      span.name === "PetRepository.findById" && span.traceId === callerTraceId
    )
    expect(repository.parentSpanId).toBe(serverSpan.spanId)
    const query = await receiver.waitFor((span) => span.parentSpanId === repository.spanId)
    expect(query.name).toBe("SELECT pets")
    expect(query.kind).toBe(3)
    expect(query.attributes).toMatchObject({ "db.system": "sqlite", "db.collection.name": "pets" })
    expect(query.attributes["db.query.text"]).toBe("SELECT id, name, category_id, status FROM pets WHERE id = ?")

    // The request's log line names its trace and span beside the request id.
    const line = server.logs().split("\n").filter((l) => l.includes(`"path":"/v1/pets/${created.id}"`)).map((l) => JSON.parse(l))[0]
    expect(line.annotations).toMatchObject({ trace_id: callerTraceId, span_id: serverSpan.spanId })

    const exported = receiver.bodies.join("\n")
    expect(exported).not.toContain(key)
    expect(exported.toLowerCase()).not.toContain("authorization")
    expect(exported).not.toContain("Bearer")
  })

  it("a failure marks its span; a request no route matched is named by its method alone", async () => {
    using folder = temporaryFolder()
    await using traced = await startTracedServer(folder.path)
    const { receiver, server } = traced
    expect((await fetch(`${server.url}/v1/pets`, { headers: { authorization: "Bearer ps_test_wrong" } })).status).toBe(401)
    const authentication = await receiver.waitFor((span) => span.name === "authenticate")
    expect(authentication.status.code).toBe(2)
    const serverSpan = receiver.spans.find((span) => span.spanId === authentication.parentSpanId)!
    expect(serverSpan.name).toBe("GET /v1/pets")
    expect(serverSpan.attributes["http.response.status_code"]).toBe(401)

    expect((await fetch(`${server.url}/v1/nothing/here`)).status).toBe(404)
    const unmatched = await receiver.waitFor((span) => span.kind === 2 && span.attributes["url.path"] === "/v1/nothing/here")
    expect(unmatched.name).toBe("GET")
    expect(unmatched.attributes["http.route"]).toBeUndefined()
    expect(receiver.bodies.join("\n")).not.toContain("ps_test_wrong")
  })

  it("the typed client sends traceparent from its current span, so the caller's trace crosses into the service", async () => {
    using folder = temporaryFolder()
    await using traced = await startTracedServer(folder.path)
    const { key, receiver, server } = traced
    const callerTrace = await Effect.gen(function*() {
      const client = yield* PetStoreClient
      yield* client.listPets({ limit: 1 })
      return (yield* Effect.currentSpan).traceId
    }).pipe(
      Effect.withSpan("caller"),
      Effect.provide(PetStoreClient.layer({ target: { baseUrl: server.url }, apiKey: Redacted.make(key) })),
      Effect.runPromise
    )
    const serverSpan = await receiver.waitFor((span) => span.kind === 2 && span.name === "GET /v1/pets")
    expect(serverSpan.traceId).toBe(callerTrace)
    expect(serverSpan.parentSpanId).toBeDefined()
  })

  it("sampling at a ratio of 0 exports no trace the caller did not sample; bad sampler settings stop the start naming the variable", async () => {
    using folder = temporaryFolder()
    await using traced = await startTracedServer(folder.path, {
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0"
    })
    const { key, receiver, server } = traced
    await fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
    // A sampled parent is followed whatever the ratio.
    await fetch(`${server.url}/v1/pets`, {
      headers: { authorization: `Bearer ${key}`, traceparent: `00-${callerTraceId}-${callerSpanId}-01` }
    })
    await receiver.waitFor((span) => span.traceId === callerTraceId && span.kind === 2)
    expect(new Set(receiver.spans.map((span) => span.traceId))).toEqual(new Set([callerTraceId]))

    const refused = await runCommand(["src/main.ts"], {
      DATABASE_URL: join(folder.path, "other.db"),
      PORT: String(freePort()),
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_TRACES_SAMPLER_ARG: "1.5"
    })
    expect(refused.exitCode).toBe(1)
    expect(refused.stdout + refused.stderr).toContain("OTEL_TRACES_SAMPLER_ARG")
  })
})
