import { Effect, Metric, MetricBoundaries } from "effect"
import type { Series } from "./Exposition.js"

/** The process's resident memory and CPU time, read when scraped. */
export const processSeries = (): Array<Series> => {
  const cpu = process.cpuUsage()
  return [
    {
      kind: "gauge",
      name: "process_resident_memory_bytes",
      help: "Resident memory of the service's processes, in bytes",
      labels: [],
      value: process.memoryUsage.rss()
    },
    {
      kind: "counter",
      name: "process_cpu_seconds_total",
      help: "CPU time (user and system) the service's processes have used, in seconds",
      labels: [],
      value: (cpu.user + cpu.system) / 1e6
    }
  ]
}

const eventLoopDelay = Metric.histogram(
  "nodejs_eventloop_delay_seconds",
  MetricBoundaries.fromIterable([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]),
  "How late a timer due every 100 ms ran: the event loop's delay, sampled ten times a second"
)

const sampleEvery = 100

/**
 * Samples the event loop's delay while the scope is open: a timer due every 100 ms records how
 * late it ran. A histogram, unlike a percentile, adds up across worker processes.
 */
export const sampleEventLoopDelay = Effect.acquireRelease(
  Effect.sync(() => {
    // Registered now, so that a scrape in the first 100 ms finds the histogram (with no sample yet).
    eventLoopDelay.unsafeValue([])
    let due = performance.now() + sampleEvery
    const timer = setInterval(() => {
      const now = performance.now()
      eventLoopDelay.unsafeUpdate(Math.max(0, now - due) / 1000, [])
      due = now + sampleEvery
    }, sampleEvery)
    timer.unref()
    return timer
  }),
  (timer) => Effect.sync(() => clearInterval(timer))
)
