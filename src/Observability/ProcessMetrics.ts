import { Effect, Metric } from "effect"
import { defaultRegistry, readAtScrape } from "./Metrics.js"

/** The process's resident memory and CPU time, read at each scrape while the scope lasts. */
const memoryAndCpu = Effect.andThen(
  readAtScrape(
    "gauge",
    "process_resident_memory_bytes",
    "Resident memory of the service's processes, in bytes",
    {},
    () => process.memoryUsage.rss()
  ),
  readAtScrape(
    "counter",
    "process_cpu_seconds_total",
    "CPU time (user and system) the service's processes have used, in seconds",
    {},
    () => {
      const cpu = process.cpuUsage()
      return (cpu.user + cpu.system) / 1e6
    }
  )
)

const eventLoopDelay = Metric.histogram("nodejs_eventloop_delay_seconds", {
  description: "How late a timer due every 100 ms ran: the event loop's delay, sampled ten times a second",
  boundaries: Metric.boundariesFromIterable([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1])
})

const sampleEvery = 100

/**
 * Samples the event loop's delay while the scope is open: a timer due every 100 ms records how
 * late it ran. A histogram, unlike a percentile, adds up across worker processes.
 */
const sampleEventLoopDelay = Effect.acquireRelease(
  Effect.sync(() => {
    // Registered now, so that a scrape in the first 100 ms finds the histogram (with no sample yet).
    eventLoopDelay.valueUnsafe(defaultRegistry)
    let due = performance.now() + sampleEvery
    const timer = setInterval(() => {
      const now = performance.now()
      eventLoopDelay.updateUnsafe(Math.max(0, now - due) / 1000, defaultRegistry)
      due = now + sampleEvery
    }, sampleEvery)
    timer.unref()
    return timer
  }),
  (timer) => Effect.sync(() => clearInterval(timer))
)

/** The process's own series, kept while the scope lasts: memory, CPU time and the event loop's delay. */
export const processMetrics = Effect.andThen(memoryAndCpu, sampleEventLoopDelay).pipe(Effect.asVoid)
