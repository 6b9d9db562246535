/**
 * What the request path costs in process, without sockets: the whole service (its SQLite stores on
 * a file of its own, or the in-memory ones; tracing off, the request log on to a sink) built from
 * each source folder given and called through a web handler, in µs of CPU per request, the median of
 * rounds alternating between the folders in one process, so two commits are compared side by
 * side without the network's noise:
 *
 *   bun scripts/bench/request-path.ts /tmp/a/src /tmp/b/src
 *
 * Every folder must load one copy of the libraries: a commit whose dependencies differ from the
 * working tree's (8069bce still had `@effect/opentelemetry`) is installed from its own lock file
 * and this script run beside it, as the benchmarks page shows ("Counting instructions rather
 * than time").
 *
 * `--only=<text>` keeps the workloads whose name holds it, `--rounds=N` (15), `--metrics` turns
 * metrics on, `--in-memory` puts the in-memory stores in place of SQLite. CPU time moves by 5–20%
 * on a shared machine; the count of instructions per request (`scripts/bench/instructions.ts`,
 * which runs this script) moves by under 1%. Both the layout before the redesign (`src/Http.ts`,
 * `src/Stores.ts`) and the one after are read.
 */
import { HttpApiBuilder, type HttpApp, HttpMiddleware, HttpServer } from "@effect/platform"
import { Effect, Layer, Option, Redacted, Scope } from "effect"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"

const args = process.argv.slice(2)
const rounds = Number(args.find((arg) => arg.startsWith("--rounds="))?.slice(9) ?? 15)
const inMemory = args.includes("--in-memory")
const metrics = args.includes("--metrics")
const folders = args.filter((arg) => !arg.startsWith("--")).map((folder) => resolve(folder))
if (folders.length === 0) folders.push(join(import.meta.dirname, "../../src"))
const dataFolder = mkdtempSync(join(tmpdir(), "petstore-request-path-"))
process.on("exit", () => rmSync(dataFolder, { recursive: true, force: true }))

// Never closed: the process exits when the rounds are done.
const scope = Effect.runSync(Scope.make())

/** The first of the paths (one per layout) that the folder holds. */
const load = (src: string, ...paths: Array<string>) => {
  const path = paths.map((path) => join(src, path)).find(existsSync)
  if (path === undefined) throw new Error(`${src} holds none of ${paths.join(", ")}`)
  return import(path)
}

const handlerOf = async (src: string, index: number) => {
  const { AppLive, answered, serverMiddleware } = await load(src, "Http/Server.ts", "Http.ts")
  const { StoresLive } = await load(src, "Service/Stores.ts", "Stores.ts")
  const { ExactRoutes } = await load(src, "Http/Routes.ts")
  const { InFlightRequests } = await load(src, "Http/InFlightRequests.ts")
  const { RequestLines } = await load(src, "Http/RequestLog.ts")
  const { AppConfig } = await load(src, "Config/AppConfig.ts", "AppConfig.ts")
  const { ObservabilityConfig } = await load(src, "Observability/ObservabilityConfig.ts")
  const { TracingLive } = await load(src, "Observability/Tracing.ts")
  const { ApiKeys } = await load(src, "Auth/ApiKeys.ts")
  const { PetRepository } = await load(src, "Pets/PetRepository.ts")
  const { Cursors } = await load(src, "Pets/Cursors.ts")
  const { RateLimiter } = await load(src, "Auth/RateLimiter.ts")
  const stores = inMemory
    ? Layer.mergeAll(PetRepository.InMemory, ApiKeys.InMemory, Cursors.InMemory, RateLimiter.InMemory)
    : StoresLive
  const base = Layer.mergeAll(stores, InFlightRequests.layer, RequestLines.layer(() => {})).pipe(
    Layer.provideMerge(Layer.mergeAll(
      AppConfig.make({
        publicBaseUrl: "http://petstore.test",
        databaseUrl: join(dataFolder, `${index}.db`),
        rateLimit: { perSecond: 1e9, burst: 1e9 },
        authFailuresPerMinute: 1e12
      }),
      ObservabilityConfig.make(metrics ? { metrics: Option.some({ host: "127.0.0.1", port: 0 }) } : {})
    ))
  )
  return Effect.runPromise(Effect.gen(function*() {
    const context = yield* Layer.buildWithScope(base, scope)
    const served = (yield* Effect.provide(serverMiddleware, context)) as (app: HttpApp.Default) => HttpApp.Default
    // Where the app is wrapped before the server sends its response (`answered`, since the errors
    // went to HttpApi's encoding), the wrapping runs here inside the server middleware: the same
    // steps, though its headers come after the web handler has answered.
    const around = answered === undefined
      ? (app: HttpApp.Default) => app
      : (yield* Effect.provide(answered, context)) as (app: HttpApp.Default) => HttpApp.Default
    const middleware = (app: HttpApp.Default) => served(around(app))
    const { key } = yield* Effect.provide(Effect.flatMap(ApiKeys, (keys: any) => keys.create("bench")), context) as any
    for (let i = 0; i < 200; i++) {
      yield* Effect.provide(Effect.flatMap(PetRepository, (pets: any) => pets.create({ name: `Rex ${i}`, categoryId: 1 })), context)
    }
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

const servers = await Promise.all(folders.map(async (folder, index) => ({ folder, ...(await handlerOf(folder, index)) })))
const requests: Record<string, (authorization: string) => Request> = {
  "GET /livez": () => new Request("http://petstore.test/livez"),
  "GET /v1/pets/7": (authorization) => new Request("http://petstore.test/v1/pets/7", { headers: { authorization } }),
  "GET /v1/pets/100000 (404)": (authorization) =>
    new Request("http://petstore.test/v1/pets/100000", { headers: { authorization } }),
  "GET /v1/pets?limit=20": (authorization) =>
    new Request("http://petstore.test/v1/pets?limit=20", { headers: { authorization } }),
  "GET /v1/pets?limit=100": (authorization) =>
    new Request("http://petstore.test/v1/pets?limit=100", { headers: { authorization } }),
  "POST /v1/pets": (authorization) =>
    new Request("http://petstore.test/v1/pets", {
      method: "POST",
      headers: { authorization, "content-type": "application/json" },
      body: JSON.stringify({ name: "Bench", categoryId: 2, status: "available" })
    }),
  "GET /v1/pets (401)": () => new Request("http://petstore.test/v1/pets", { headers: { authorization: "Bearer nope" } })
}

const perRequest = async (handler: (request: Request) => Promise<Response>, make: () => Request, count: number) => {
  const start = process.cpuUsage()
  for (let i = 0; i < count; i++) await (await handler(make())).arrayBuffer()
  const used = process.cpuUsage(start)
  return (used.user + used.system) / count
}

const median = (values: Array<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
const only = args.find((arg) => arg.startsWith("--only="))?.slice(7)
for (const [label, make] of Object.entries(requests)) {
  if (only !== undefined && !label.includes(only)) continue
  const results = new Map<string, Array<number>>(servers.map(({ folder }) => [folder, []]))
  for (const { authorization, handler } of servers) await perRequest(handler, () => make(authorization), 1000)
  for (let round = 0; round < rounds; round++) {
    // Each folder first in every other round: the one run first tends to run faster.
    const order = round % 2 === 0 ? servers : [...servers].reverse()
    for (const { authorization, folder, handler } of order) {
      results.get(folder)!.push(await perRequest(handler, () => make(authorization), 1000))
    }
  }
  const [first, ...others] = [...results.values()]
  const line = [...results].map(([folder, values]) => `${folder} ${median(values).toFixed(1)}`).join("\t")
  const ratios = others.map((values) => median(values.map((value, round) => value / first![round]!)).toFixed(3))
  console.log(`${label}\t${line}\tµs/request; ratio to the first: ${ratios.join(" ")}`)
}
process.exit(0)
