import { Context, Duration, Effect, Metric } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { defaultRegistry, readAtScrape, registered } from "./Metrics.js"

/** Set in the workers' environment: the folder where each worker serves its metrics on a socket. */
export const metricsFolderVariable = "PETSTORE_METRICS_FOLDER"

const socketOf = (folder: string, worker: number) => join(folder, `worker-${worker}.sock`)

const eventLoopDelay = Metric.histogram("nodejs_eventloop_delay_seconds", {
  description: "How late a timer due every 100 ms ran: the event loop's delay, sampled ten times a second",
  boundaries: Metric.boundariesFromIterable([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1])
})

/** The process's memory and CPU time read at each scrape, and its event loop's delay sampled every 100 ms. */
const processMetrics = Effect.gen(function*() {
  const memory = "Resident memory of the service's processes, in bytes"
  yield* readAtScrape("gauge", "process_resident_memory_bytes", memory, {}, () => process.memoryUsage.rss())
  const cpu = "CPU time (user and system) the service's processes have used, in seconds"
  yield* readAtScrape("counter", "process_cpu_seconds_total", cpu, {}, () => {
    const { system, user } = process.cpuUsage()
    return (user + system) / 1e6
  })
  const recordDelay = registered(eventLoopDelay)
  yield* Effect.timed(Effect.sleep(100)).pipe(
    Effect.map(([took]) => recordDelay(Math.max(0, Duration.toSeconds(took) - 0.1))),
    Effect.forever,
    Effect.forkScoped
  )
})

const serving = <E>(start: Effect.Effect<Bun.Server<undefined>, E>) =>
  Effect.acquireRelease(start, (server) => Effect.promise(() => server.stop(true)))

/** A listener of its own for `GET /metrics`, never the API's port: no key is asked there. */
const listen = (host: string, port: number, exposition: () => Promise<string> | string) =>
  serving(Effect.try({
    try: () =>
      Bun.serve({
        hostname: host,
        port,
        // Bun shares a port between processes unless told not to: a second instance must fail, not split the scrapes.
        reusePort: false,
        development: false,
        fetch: async (request) =>
          new URL(request.url).pathname !== "/metrics" || request.method !== "GET"
            ? new Response("Not Found: metrics are at /metrics\n", { status: 404 })
            : new Response(await exposition(), {
              headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" }
            })
      }),
    catch: (cause) => new Error(`Cannot serve metrics on ${host}:${port} (METRICS_HOST, METRICS_PORT): ${cause}`)
  }))

export const serveMetrics = (host: string, port: number) =>
  Effect.andThen(processMetrics, listen(host, port, () => PrometheusMetrics.formatUnsafe(defaultRegistry)))

/** A worker: its metrics' snapshot as JSON on its socket in `folder`, for the supervisor to add up. */
export const serveWorkerMetrics = (folder: string, worker: number) =>
  Effect.andThen(
    processMetrics,
    serving(Effect.sync(() => {
      const path = socketOf(folder, worker)
      // A socket left by this worker's predecessor (killed) would refuse the new listener.
      rmSync(path, { force: true })
      return Bun.serve({
        unix: path,
        fetch: () => Response.json({ pid: process.pid, snapshot: Metric.snapshotUnsafe(defaultRegistry) })
      })
    }))
  )

type Snapshot = Metric.Metric.Snapshot

const keyOf = (one: Snapshot) =>
  JSON.stringify([one.type, one.id, one.description, Object.entries(one.attributes ?? {}).sort()])

const sum = (a: Snapshot, b: Snapshot): Snapshot["state"] => {
  if (a.type === "Histogram" && b.type === "Histogram") {
    const [x, y] = [a.state, b.state]
    return {
      buckets: x.buckets.map(([bound, count], i) => [bound, count + (y.buckets[i]?.[1] ?? 0)]),
      count: x.count + y.count,
      sum: x.sum + y.sum,
      min: Math.min(x.min, y.min),
      max: Math.max(x.max, y.max)
    }
  }
  if (a.type === "Counter" && b.type === "Counter") {
    return { ...a.state, count: Number(a.state.count) + Number(b.state.count) }
  }
  if (a.type === "Gauge" && b.type === "Gauge") return { value: Number(a.state.value) + Number(b.state.value) }
  return a.state
}

const addUp = (groups: ReadonlyArray<ReadonlyArray<Snapshot>>): Array<Snapshot> => {
  const total = new Map<string, Snapshot>()
  for (const one of groups.flat()) {
    const earlier = total.get(keyOf(one))
    total.set(keyOf(one), earlier === undefined ? one : { ...earlier, state: sum(earlier, one) } as Snapshot)
  }
  return [...total.values()]
}

const render = (snapshots: ReadonlyArray<Snapshot>): string => {
  const registry: Metric.MetricRegistry = new Map()
  for (const snapshot of snapshots) {
    // A worker's histogram arrives with its last bound, Infinity, as JSON's null.
    const { state, ...metadata } = snapshot.type !== "Histogram" ? snapshot : {
      ...snapshot,
      state: { ...snapshot.state, buckets: snapshot.state.buckets.map(([le, n]) => [le ?? Infinity, n] as const) }
    }
    registry.set(keyOf(snapshot), { ...metadata, hooks: { get: () => state, update: () => {}, modify: () => {} } })
  }
  return PrometheusMetrics.formatUnsafe(Context.make(Metric.MetricRegistry, registry))
}

const isTotal = (one: Snapshot) => one.type !== "Gauge"

/** The supervisor's listener: its series and its workers' added up, a gone worker's counters kept, its gauges not. */
export const serveGroupMetrics = (host: string, port: number, count: number) =>
  Effect.gen(function*() {
    const folder = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "petstore-metrics-"))),
      (folder) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
    )
    // Per worker: the process last seen, its last snapshot, and the totals of those it replaced.
    const none: ReadonlyArray<Snapshot> = []
    const slots = Array.from({ length: count }, () => ({ pid: 0, last: none, retired: none }))
    const scrape = (worker: number) =>
      fetch("http://worker/metrics", { unix: socketOf(folder, worker), signal: AbortSignal.timeout(2000) })
        .then((response) => response.json() as Promise<{ pid: number; snapshot: Array<Snapshot> }>)
        .catch(() => undefined)
    const exposition = async () => {
      const answers = await Promise.all(slots.map((_, index) => scrape(index + 1)))
      const groups: Array<ReadonlyArray<Snapshot>> = [Metric.snapshotUnsafe(defaultRegistry)]
      answers.forEach((answer, index) => {
        const slot = slots[index]!
        if (answer !== undefined && answer.pid !== slot.pid) {
          slot.retired = addUp([slot.retired, slot.last.filter(isTotal)])
          slot.pid = answer.pid
        }
        if (answer !== undefined) slot.last = answer.snapshot
        groups.push(slot.retired, answer === undefined ? slot.last.filter(isTotal) : slot.last)
      })
      return render(addUp(groups))
    }
    yield* processMetrics
    yield* listen(host, port, exposition)
    return folder
  })
