/**
 * What the request path costs in process, without sockets: the whole service (its SQLite stores on
 * a file of its own, or the in-memory ones; tracing off, the request log on to a sink) built from
 * each source folder given and called through a web handler, in µs of CPU per request, the median of
 * rounds alternating between the folders in one process, so two commits are compared side by
 * side without the network's noise:
 *
 *   bun scripts/bench/request-path.ts /tmp/a/src /tmp/b/src
 *
 * Each folder's `HttpLive` (`Http/Server.ts`, the app under the server middleware as `main.ts`
 * serves it) is served by an `HttpServer` that makes a web handler of what it is given
 * (`HttpEffect.toWebHandlerWith`, what `HttpRouter.toWebHandler` runs) instead of listening.
 *
 * Every folder must load one copy of the libraries: a commit whose dependencies differ from the
 * working tree's is installed from its own lock file and this script run beside it, as the
 * benchmarks page shows ("Counting instructions rather than time"). A commit on another major
 * version of effect has neither this layout nor this API: measure it with its own copy of this
 * script, in a process of its own (`scripts/bench/instructions.ts` runs one folder per process).
 *
 * `--only=<text>` keeps the workloads whose name holds it, `--rounds=N` (15), `--metrics` turns
 * metrics on, `--in-memory` puts the in-memory stores in place of SQLite. CPU time moves by 5–20%
 * on a shared machine; the count of instructions per request (`scripts/bench/instructions.ts`,
 * which runs this script) moves by under 1%.
 */
import { Context, Deferred, Effect, Layer, Option, Redacted, Scope } from "effect"
import { HttpEffect, HttpServer, type HttpServerRequest } from "effect/http"
import { NetAddress } from "effect/net"
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

const load = (src: string, path: string) => {
  if (!existsSync(join(src, path))) throw new Error(`${src} holds no ${path}`)
  return import(join(src, path))
}

type Handler = (request: Request) => Promise<Response>

/** An `HttpServer` that listens nowhere: what it is asked to serve becomes a web handler. */
const webHandlerServer = (handler: Deferred.Deferred<Handler>) =>
  Layer.succeed(HttpServer.HttpServer)(HttpServer.make({
    address: NetAddress.inetAddressFromIpStringUnsafe("127.0.0.1", 80),
    serve: (app, middleware) =>
      Effect.flatMap(Effect.context<never>(), (context) =>
        Deferred.succeed(handler, HttpEffect.toWebHandlerWith<never, HttpServerRequest.HttpServerRequest | Scope.Scope>(context)(app, middleware) as Handler))
  }))

const handlerOf = async (src: string, index: number) => {
  const { HttpLive } = await load(src, "Http/Server.ts")
  const { StoresLive } = await load(src, "Service/Stores.ts")
  const { InFlightRequests } = await load(src, "Http/InFlightRequests.ts")
  const { RequestLines } = await load(src, "Http/RequestLog.ts")
  const { AppConfig } = await load(src, "Config/AppConfig.ts")
  const { ObservabilityConfig } = await load(src, "Observability/ObservabilityConfig.ts")
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
    const context = (yield* Layer.buildWithScope(base, scope)) as Context.Context<never>
    const { key } = yield* Effect.provideContext(Effect.flatMap(ApiKeys, (keys: any) => keys.create("bench")), context) as any
    for (let i = 0; i < 200; i++) {
      yield* Effect.provideContext(
        Effect.flatMap(PetRepository, (pets: any) => pets.create({ name: `Rex ${i}`, categoryId: 1 })),
        context
      )
    }
    const handler = yield* Deferred.make<Handler>()
    const served = (HttpLive as Layer.Layer<never, unknown, any>).pipe(
      Layer.provide(webHandlerServer(handler)),
      Layer.provide(Layer.succeedContext(context))
    )
    yield* Layer.buildWithScope(served, scope)
    return { handler: yield* Deferred.await(handler), authorization: `Bearer ${Redacted.value(key)}` }
  }) as Effect.Effect<{ handler: Handler; authorization: string }, unknown>)
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

const perRequest = async (handler: Handler, make: () => Request, count: number) => {
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
  // A workload measures what its name says: the status in its name, or a success.
  const expected = /\((\d{3})\)/.exec(label)?.[1]
  for (const { authorization, folder, handler } of servers) {
    const { status } = await handler(make(authorization))
    if (expected === undefined ? status >= 300 : status !== Number(expected)) throw new Error(`${folder}: ${label} answered ${status}`)
  }
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
