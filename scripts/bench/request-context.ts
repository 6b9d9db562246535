/**
 * What carrying a request's record costs, per request, in one fiber's loop: the platform's own
 * `provideService` of the request, then three reads of the record, its record carried five ways:
 * not at all, `Effect.provideService` of a `Context.Service`, `Effect.provideService` of a
 * `Context.Reference` (its default when not provided), written into the fiber's context in place
 * (the request's fiber ends with it, so nothing needs restoring), and a `WeakMap` keyed by the
 * request. The median of nine rounds, in µs per request; the differences from `none` are what each
 * way adds.
 *
 *   bun scripts/bench/request-context.ts
 */
import { Context, Effect } from "effect"

interface Request {
  readonly url: string
}
interface Record {
  readonly id: string
}
const Request = Context.Service<Request>("bench/Request")
const Current = Context.Service<Record>("bench/Current")
const CurrentReference = Context.Reference<Record | undefined>("bench/CurrentReference", { defaultValue: () => undefined })

// A request's context holds some twenty-five services by the time it reaches the server middleware.
let services: Context.Context<never> = Context.empty()
for (let i = 0; i < 25; i++) services = Context.add(services, Context.Service<number>(`bench/Service${i}`), i) as Context.Context<never>

const table = new WeakMap<Request, Record>()
const threeReads = <R>(read: Effect.Effect<unknown, never, R>) => Effect.flatMap(read, () => Effect.flatMap(read, () => read))

const ways: { readonly [name: string]: (request: Request) => Effect.Effect<unknown> } = {
  none: () => threeReads(Effect.void),
  provideService: () => Effect.provideService(threeReads(Current), Current, { id: "x" }),
  "provideService, a Reference": () => Effect.provideService(threeReads(CurrentReference), CurrentReference, { id: "x" }),
  "in place": () =>
    Effect.withFiber((fiber) => {
      fiber.setContext(Context.add(fiber.context, CurrentReference, { id: "x" }))
      return threeReads(CurrentReference)
    }),
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
  Effect.runSync(Effect.provideContext(loop, services))
  return ((performance.now() - start) * 1000) / count
}

const results = new Map<string, Array<number>>()
for (let round = 0; round < 9; round++) {
  for (const [name, way] of Object.entries(ways)) results.set(name, [...(results.get(name) ?? []), perRequest(way, 50_000)])
}
for (const [name, values] of results) console.log(`${name}\t${values.sort((a, b) => a - b)[4]!.toFixed(2)} µs/request`)
