/**
 * What carrying a request's record costs, per request, in one fiber's loop: the platform's own
 * `provideService` of the request, then three reads of the record, its record carried five ways:
 * not at all, `Effect.provideService`, written into the fiber's context in place (the request's
 * fiber ends with it, so nothing needs restoring), a fiber reference set in place (what
 * `src/Request/CurrentRequest.ts` does), and a `WeakMap` keyed by the request. The median
 * of nine rounds, in µs per request; the differences from `none` are what each way adds.
 *
 *   bun scripts/bench/request-context.ts
 */
import { Context, Effect, FiberRef } from "effect"

interface Request {
  readonly url: string
}
interface Record {
  readonly id: string
}
const Request = Context.GenericTag<Request>("bench/Request")
class Current extends Context.Reference<Current>()("bench/Current", { defaultValue: (): Record | undefined => undefined }) {}

// A request's context holds some twenty-five services by the time it reaches the server middleware.
let services: Context.Context<never> = Context.empty()
for (let i = 0; i < 25; i++) services = Context.add(services, Context.GenericTag<number>(`bench/Service${i}`), i)

const table = new WeakMap<Request, Record>()
const currentRecord = FiberRef.unsafeMake<Record | undefined>(undefined)
const threeReads = (read: Effect.Effect<unknown>) => Effect.flatMap(read, () => Effect.flatMap(read, () => read))

const ways: { readonly [name: string]: (request: Request) => Effect.Effect<unknown> } = {
  none: () => threeReads(Effect.void),
  provideService: () => Effect.provideService(threeReads(Current), Current, { id: "x" }),
  "in place": () =>
    Effect.zipRight(
      FiberRef.update(FiberRef.currentContext, (context) => Context.add(context, Current, { id: "x" })),
      threeReads(Current)
    ),
  "fiber reference": () =>
    Effect.zipRight(
      FiberRef.set(currentRecord, { id: "x" }),
      threeReads(Effect.withFiberRuntime((fiber) => Effect.succeed(fiber.getFiberRef(currentRecord))))
    ),
  WeakMap: (request) => {
    table.set(request, { id: "x" })
    return threeReads(Effect.sync(() => table.get(request)))
  }
}

const perRequest = (way: (request: Request) => Effect.Effect<unknown>, count: number) => {
  const loop = Effect.gen(function*() {
    for (let i = 0; i < count; i++) {
      const request = { url: "/" }
      yield* Effect.provideService(way(request), Request, request)
    }
  })
  const start = performance.now()
  Effect.runSync(Effect.provide(loop, services))
  return ((performance.now() - start) * 1000) / count
}

const results = new Map<string, Array<number>>()
for (let round = 0; round < 9; round++) {
  for (const [name, way] of Object.entries(ways)) results.set(name, [...(results.get(name) ?? []), perRequest(way, 50_000)])
}
for (const [name, values] of results) console.log(`${name}\t${values.sort((a, b) => a - b)[4]!.toFixed(2)} µs/request`)
