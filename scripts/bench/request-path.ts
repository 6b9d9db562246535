/**
 * What the request path costs in process, without sockets: the service's app (in-memory stores,
 * metrics on, tracing off, the request log on to a sink) built from each source folder given and
 * called through a web handler, in µs of CPU per request, the median of alternating rounds in one
 * process, so two commits are compared side by side:
 *
 *   git archive main src | tar -x -C /tmp/main && ln -s "$PWD/node_modules" /tmp/main/node_modules
 *   bun scripts/bench/request-path.ts /tmp/main/src src
 *
 * The folder loaded first tends to run faster (its code is compiled first): run both orders.
 */
import { HttpApiBuilder, type HttpApp, HttpMiddleware, HttpServer } from "@effect/platform"
import { Effect, Layer, Redacted, Scope } from "effect"
import { join, resolve } from "node:path"

const folders = process.argv.slice(2).map((folder) => resolve(folder))
if (folders.length === 0) folders.push(join(import.meta.dirname, "../../src"))

// Never closed: the process exits when the rounds are done.
const scope = Effect.runSync(Scope.make())

const handlerOf = async (src: string) => {
  const { AppLive, serverMiddleware } = await import(join(src, "Http/Server.ts"))
  const { ExactRoutes } = await import(join(src, "Http/Routes.ts"))
  const { InFlightRequests } = await import(join(src, "Http/InFlightRequests.ts"))
  const { RequestLines } = await import(join(src, "Http/RequestLog.ts"))
  const { AppConfig } = await import(join(src, "Config/AppConfig.ts"))
  const { ObservabilityConfig } = await import(join(src, "Observability/ObservabilityConfig.ts"))
  const { TracingLive } = await import(join(src, "Observability/Tracing.ts"))
  const { ApiKeys } = await import(join(src, "Auth/ApiKeys.ts"))
  const { RateLimiter } = await import(join(src, "Auth/RateLimiter.ts"))
  const { Cursors } = await import(join(src, "Pets/Cursors.ts"))
  const { PetRepository } = await import(join(src, "Pets/PetRepository.ts"))
  const base = Layer.mergeAll(
    PetRepository.InMemory,
    ApiKeys.InMemory,
    Cursors.InMemory,
    RateLimiter.InMemory,
    InFlightRequests.layer,
    RequestLines.layer(() => {})
  ).pipe(Layer.provideMerge(Layer.mergeAll(
    AppConfig.make({ publicBaseUrl: "http://petstore.test", rateLimit: { perSecond: 1e9, burst: 1e9 } }),
    ObservabilityConfig.make({})
  )))
  return Effect.runPromise(Effect.gen(function*() {
    const context = yield* Layer.buildWithScope(base, scope)
    const middleware = (yield* Effect.provide(serverMiddleware, context)) as (app: HttpApp.Default) => HttpApp.Default
    const { key } = yield* Effect.provide(Effect.flatMap(ApiKeys, (keys: any) => keys.create("bench")), context) as any
    yield* Effect.provide(Effect.flatMap(PetRepository, (pets: any) => pets.create({ name: "Rex", categoryId: 1 })), context)
    const app = Layer.mergeAll(AppLive, HttpServer.layerContext).pipe(
      Layer.provide(ExactRoutes),
      HttpMiddleware.withTracerDisabledWhen(() => true),
      Layer.provide(TracingLive),
      Layer.provide(Layer.succeedContext(context))
    )
    const { handler } = HttpApiBuilder.toWebHandler(app as any, { middleware: middleware as any })
    return { handler, authorization: `Bearer ${Redacted.value(key)}` }
  }) as Effect.Effect<{ handler: (request: Request) => Promise<Response>; authorization: string }>)
}

const servers = await Promise.all(folders.map(async (folder) => ({ folder, ...(await handlerOf(folder)) })))
const requests = {
  "GET /livez": () => new Request("http://petstore.test/livez"),
  "GET /v1/pets/1": (authorization: string) => new Request("http://petstore.test/v1/pets/1", { headers: { authorization } }),
  "GET /v1/pets?limit=1": (authorization: string) =>
    new Request("http://petstore.test/v1/pets?limit=1", { headers: { authorization } })
}

const perRequest = async (
  handler: (request: Request) => Promise<Response>,
  make: () => Request,
  count: number
) => {
  const start = process.cpuUsage()
  for (let i = 0; i < count; i++) await (await handler(make())).arrayBuffer()
  const used = process.cpuUsage(start)
  return (used.user + used.system) / count
}

const median = (values: Array<number>) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!
for (const [label, make] of Object.entries(requests)) {
  const results = new Map<string, Array<number>>(servers.map(({ folder }) => [folder, []]))
  for (const { authorization, handler } of servers) await perRequest(handler, () => make(authorization), 2000)
  for (let round = 0; round < 15; round++) {
    for (const { authorization, folder, handler } of servers) {
      results.get(folder)!.push(await perRequest(handler, () => make(authorization), 2000))
    }
  }
  for (const [folder, values] of results) console.log(`${label}\t${folder}\t${median(values).toFixed(1)} µs/request`)
}
process.exit(0)
