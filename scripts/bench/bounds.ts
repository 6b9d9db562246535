/**
 * The bounds the benchmark holds, each checked and printed with its figure; `--bounds` exits 1 when
 * one is exceeded (docs/benchmarks.md#bounds). With every request traced and the collector away
 * (stopped: its port refuses; hung: it takes each export and never answers), reads answer with a
 * median under 50 ms and a 99th percentile under 500 ms, and twice the requests add under 40 MiB of
 * resident memory (spans beyond the queue are dropped). A million failures from distinct addresses
 * grow the in-memory limiter's process by under 64 MiB.
 */
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { join } from "node:path"
import { RateLimiter } from "../../src/Auth/RateLimiter.js"
import { readLoad } from "../../test/support/ReadLoad.js"
import { freePort } from "../../test/support/ServerProcess.js"
import { allCores, createKey, folder, rssMiB, startServer } from "./setup.js"

/** One bound: what was measured, its figure and its limit. */
export interface Bound {
  readonly what: string
  readonly value: number
  readonly limit: number
  readonly unit: string
}

const report = (bound: Bound) => {
  const held = bound.value < bound.limit
  console.log(
    `  ${held ? "ok  " : "FAIL"} ${bound.what}: ${
      bound.value.toFixed(1)
    } ${bound.unit} (bound: under ${bound.limit} ${bound.unit})`
  )
  return bound
}

/** Every request traced while the collector is `collector`: the latency and memory bounds. */
const collectorAway = async (collector: "stopped" | "hung"): Promise<Array<Bound>> => {
  const hung = collector === "hung"
    ? Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Promise<Response>(() => {}) })
    : undefined
  const databaseUrl = join(folder, `bounds-${collector}.db`)
  const key = createKey(databaseUrl)
  const port = freePort()
  const server = await startServer(`bounds-${collector}`, port, key, {
    DATABASE_URL: databaseUrl,
    METRICS_PORT: "off",
    // Stopped: a port nothing listens on.
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${hung?.port ?? freePort()}`,
    OTEL_EXPORTER_OTLP_TIMEOUT: "500",
    OTEL_TRACES_SAMPLER: "always_on",
    OTEL_BSP_SCHEDULE_DELAY: "20",
    OTEL_BSP_MAX_QUEUE_SIZE: "200",
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "50"
  }, { cores: allCores })
  try {
    const first = await readLoad(server.url, key, 1500)
    const rssAfterFirst = rssMiB(server.pid)
    const second = await readLoad(server.url, key, 3000)
    // Garbage not yet collected shows as a passing rise; spans held stay through a few more requests.
    const rssAfterSecond = Math.min(rssMiB(server.pid), (await readLoad(server.url, key, 300), rssMiB(server.pid)))
    const statuses = [...first.statuses, ...second.statuses].filter((status) => status !== 200)
    if (statuses.length > 0) throw new Error(`collector ${collector}: reads answered ${statuses.join(", ")}`)
    const what = `collector ${collector}, every request traced`
    return [
      { what: `${what}: median of 1,500 reads`, value: first.median, limit: 50, unit: "ms" },
      { what: `${what}: median of 3,000 more`, value: second.median, limit: 50, unit: "ms" },
      { what: `${what}: 99th percentile of 1,500 reads`, value: first.p99, limit: 500, unit: "ms" },
      { what: `${what}: 99th percentile of 3,000 more`, value: second.p99, limit: 500, unit: "ms" },
      {
        what: `${what}: resident memory added by the 3,000`,
        value: rssAfterSecond - rssAfterFirst,
        limit: 40,
        unit: "MiB"
      }
    ]
  } finally {
    await server.stop()
    await hung?.stop(true)
  }
}

/** A million failed authentications from distinct /64s on the in-memory limiter, in this process, its clock still. */
const limiterMemory = (): Promise<Bound> =>
  Effect.gen(function*() {
    const limiter = yield* RateLimiter
    const failures = { name: "failed-authentication", perSecond: 20 / 60, burst: 20 }
    Bun.gc(true)
    const before = process.memoryUsage().rss
    for (let i = 0; i < 1_000_000; i++) {
      yield* limiter.take(failures, `2001:db8:${(i >> 16).toString(16)}:${(i & 0xffff).toString(16)}::/64`)
    }
    Bun.gc(true)
    // The collector hands freed pages back to the system a moment after it runs.
    yield* Effect.promise(() => Bun.sleep(1000))
    Bun.gc(true)
    const grown = (process.memoryUsage().rss - before) / 1024 / 1024
    return {
      what: "a million failures from distinct addresses: the limiter's resident memory",
      value: grown,
      limit: 64,
      unit: "MiB"
    }
  }).pipe(Effect.provide(Layer.merge(RateLimiter.InMemory, TestClock.layer())), Effect.runPromise)

/** Every bound, measured and printed; those exceeded are returned. */
export const checkBounds = async () => {
  console.log("bounds:")
  const bounds = [report(await limiterMemory())]
  for (const collector of ["stopped", "hung"] as const) {
    for (const bound of await collectorAway(collector)) bounds.push(report(bound))
  }
  const exceeded = bounds.filter((bound) => bound.value >= bound.limit)
  console.log(exceeded.length === 0 ? "every bound held" : `${exceeded.length} bound(s) exceeded`)
  return { bounds, exceeded }
}
