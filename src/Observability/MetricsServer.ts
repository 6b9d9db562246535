import { Effect } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { addUp, contentType, MetricsCollectors, registrySeries, render, type Series } from "./Exposition.js"
import { processSeries, sampleEventLoopDelay } from "./ProcessMetrics.js"

/** Set in the workers' environment: the folder where each worker serves its metrics on a socket. */
export const metricsFolderVariable = "PETSTORE_METRICS_FOLDER"

const socketOf = (folder: string, worker: number) => join(folder, `worker-${worker}.sock`)

/** This process's series: its Effect metrics, what collectors read now, and its memory and CPU time. */
const ownSeries = Effect.map(MetricsCollectors, (collectors) => (): Array<Series> => [
  ...registrySeries(),
  ...collectors.series(),
  ...processSeries()
])

const notFound = () => new Response("Not Found: metrics are at /metrics\n", { status: 404 })

/** A listener of its own for `GET /metrics`, never the API's port: no key is asked there. */
const listen = (host: string, port: number, exposition: () => Promise<string> | string) =>
  Effect.acquireRelease(
    Effect.try({
      try: () =>
        Bun.serve({
          hostname: host,
          port,
          // Bun shares a port between processes unless told not to: a second instance must fail, not split the scrapes.
          reusePort: false,
          development: false,
          fetch: async (request) => {
            if (new URL(request.url).pathname !== "/metrics" || request.method !== "GET") return notFound()
            return new Response(await exposition(), { headers: { "content-type": contentType } })
          }
        }),
      catch: (cause) => new Error(`Cannot serve metrics on ${host}:${port} (METRICS_HOST, METRICS_PORT): ${cause}`)
    }),
    (server) => Effect.promise(() => server.stop(true))
  )

/** One process serving its own metrics on `host:port`. */
export const serveMetrics = (host: string, port: number) =>
  Effect.flatMap(ownSeries, (own) => Effect.zipRight(sampleEventLoopDelay, listen(host, port, () => render(own()))))

/** A worker: its series as JSON on its socket in `folder`, for the supervisor to add up. */
export const serveWorkerMetrics = (folder: string, worker: number) =>
  Effect.flatMap(ownSeries, (own) =>
    Effect.zipRight(
      sampleEventLoopDelay,
      Effect.acquireRelease(
        Effect.sync(() => {
          const path = socketOf(folder, worker)
          // A socket left by this worker's predecessor (killed) would refuse the new listener.
          rmSync(path, { force: true })
          return Bun.serve({ unix: path, fetch: () => Response.json({ pid: process.pid, series: own() }) })
        }),
        (server) => Effect.promise(() => server.stop(true))
      )
    ))

const isTotal = (series: Series) => series.kind !== "gauge"

/**
 * The supervisor of `count` workers: one scrape of `host:port` asks every worker for its series
 * and adds them up with the supervisor's own. Counters never go back: a worker that died or was
 * replaced keeps counting with the totals last seen from it; its gauges leave with it.
 * Answers with the folder the workers must be given (`PETSTORE_METRICS_FOLDER`).
 */
export const serveGroupMetrics = (host: string, port: number, count: number) =>
  Effect.gen(function*() {
    const own = yield* ownSeries
    const folder = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "petstore-metrics-"))),
      (folder) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
    )
    const slots = Array.from({ length: count }, () => ({
      pid: 0,
      last: [] as ReadonlyArray<Series>,
      retired: [] as ReadonlyArray<Series>
    }))
    const scrape = (worker: number) =>
      fetch("http://worker/metrics", { unix: socketOf(folder, worker), signal: AbortSignal.timeout(2000) })
        .then((response) => response.json() as Promise<{ pid: number; series: Array<Series> }>)
        // JSON has no Infinity: the +Inf bucket's bound arrives as null.
        .then(({ pid, series }) => ({
          pid,
          series: series.map((one) =>
            one.kind === "histogram" ? { ...one, buckets: one.buckets.map(([le, n]) => [le ?? Infinity, n] as const) } : one
          )
        }))
        .catch(() => undefined)
    const exposition = async () => {
      const answers = await Promise.all(slots.map((_, index) => scrape(index + 1)))
      const groups: Array<ReadonlyArray<Series>> = [own()]
      answers.forEach((answer, index) => {
        const slot = slots[index]!
        if (answer !== undefined && answer.pid !== slot.pid) {
          slot.retired = addUp([slot.retired, slot.last.filter(isTotal)])
          slot.pid = answer.pid
        }
        if (answer !== undefined) slot.last = answer.series
        groups.push(slot.retired, answer === undefined ? slot.last.filter(isTotal) : slot.last)
      })
      return render(addUp(groups))
    }
    yield* sampleEventLoopDelay
    yield* listen(host, port, exposition)
    return folder
  })
