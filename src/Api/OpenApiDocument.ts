type Json = Record<string, any>

/** The schema of a parameter that is text on the wire but not in value (an integer in the path or query). */
export const withParameterSchemas = (schemas: Record<string, Json>) => (operation: Json): Json => {
  for (const parameter of operation.parameters ?? []) parameter.schema = schemas[parameter.name] ?? parameter.schema
  return operation
}

/** Response headers as `[description, example]` by status (`"*"` for all), which HttpApi's schemas do not describe. */
export const withResponseHeaders =
  (headers: Record<string, Record<string, readonly [string, string]>>) => (operation: Json): Json => {
    for (const [status, response] of Object.entries<Json>(operation.responses)) {
      const declared = { ...headers["*"], ...headers[status] }
      if (Object.keys(declared).length === 0) continue
      response.headers ??= {}
      for (const [name, [description, example]] of Object.entries(declared)) {
        response.headers[name] = { description, schema: { type: "string" }, example }
      }
    }
    return operation
  }

const withCommonHeaders = withResponseHeaders({
  "*": {
    "X-Request-Id": [
      "Names the request in the service's log: the caller's X-Request-Id when it sent one, else a new id.",
      "6f1c9a52-8d2e-4d7e-9a55-0c1f3b2a7e10"
    ]
  },
  "401": {
    "WWW-Authenticate": [
      "The bearer challenge (RFC 6750); `error=\"invalid_token\"` when a key was sent but refused.",
      "Bearer realm=\"petstore\", error=\"invalid_token\""
    ]
  },
  "429": {
    "Retry-After": ["Seconds until a request is allowed again.", "1"],
    "RateLimit-Policy": [
      "The quota (draft-ietf-httpapi-ratelimit-headers-10): q requests per w seconds.",
      "\"per-key\";q=200;w=2"
    ],
    "RateLimit": ["What is left of the quota (r) and the seconds until it is whole again (t).", "\"per-key\";r=0;t=2"]
  }
})

/** Every parameter carries its schema's description, where viewers look; every response its common headers. */
export const finishDocument = (spec: Json): Json => {
  for (const operations of Object.values<Json>(spec.paths)) {
    for (const operation of Object.values<Json>(operations)) {
      for (const parameter of operation.parameters ?? []) parameter.description ??= parameter.schema?.description
      withCommonHeaders(operation)
    }
  }
  return spec
}
