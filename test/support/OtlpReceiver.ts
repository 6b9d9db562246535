import { waitFor } from "./WaitFor.js"

/** A span as OTLP/HTTP JSON carries it, with its attributes flattened. */
export interface ReceivedSpan {
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly kind: number
  /** Nanoseconds since the epoch. */
  readonly startTimeUnixNano: bigint
  readonly endTimeUnixNano: bigint
  readonly status: { readonly code?: number; readonly message?: string }
  readonly attributes: Record<string, unknown>
  readonly events: ReadonlyArray<{ readonly name: string; readonly attributes: Record<string, unknown> }>
  readonly resource: Record<string, unknown>
}

const flatten = (attributes: ReadonlyArray<{ key: string; value: Record<string, unknown> }> = []) =>
  Object.fromEntries(attributes.map(({ key, value }) => {
    const [kind, inner] = Object.entries(value)[0] ?? ["", undefined]
    return [key, kind === "intValue" ? Number(inner) : inner]
  }))

/**
 * An OTLP/HTTP receiving end on a free loopback port: keeps every span posted to `/v1/traces`
 * (JSON), and every request body as it came, to search for what must never be exported.
 */
export const startOtlpReceiver = () => {
  const spans: Array<ReceivedSpan> = []
  const bodies: Array<string> = []
  const userAgents: Array<string | null> = []
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (request) => {
      const body = await request.text()
      bodies.push(body)
      userAgents.push(request.headers.get("user-agent"))
      if (new URL(request.url).pathname !== "/v1/traces") return new Response("not found", { status: 404 })
      for (const resourceSpans of JSON.parse(body).resourceSpans ?? []) {
        const resource = flatten(resourceSpans.resource?.attributes)
        for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
          for (const span of scopeSpans.spans ?? []) {
            spans.push({
              name: span.name,
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId || undefined,
              kind: span.kind,
              startTimeUnixNano: BigInt(span.startTimeUnixNano),
              endTimeUnixNano: BigInt(span.endTimeUnixNano),
              status: span.status ?? {},
              attributes: flatten(span.attributes),
              events: (span.events ?? []).map((
                event: { name: string; attributes?: Parameters<typeof flatten>[0] }
              ) => ({
                name: event.name,
                attributes: flatten(event.attributes)
              })),
              resource
            })
          }
        }
      }
      return Response.json({})
    }
  })
  return {
    endpoint: `http://127.0.0.1:${server.port}`,
    spans,
    bodies,
    userAgents,
    /** Waits until a span satisfying `found` has arrived. */
    waitFor: (found: (span: ReceivedSpan) => boolean) =>
      waitFor(() => spans.find(found), {
        what: () => `no such span arrived; got ${spans.map((s) => s.name).join(", ")}`,
        interval: 50
      }),
    stop: () => server.stop(true)
  }
}
