/**
 * What metrics and traces cost: the service started four ways, measured in the same turns on get
 * by id, a list of 20 and a create. Metrics on (the default) against `METRICS_PORT=off`; traces
 * sampled at 1% (`parentbased_traceidratio`, 0.01) and every trace (`always_on`), exported to a
 * local receiving end (`otlp-sink.ts`, on the load generator's core), against tracing off, with
 * metrics off so each is measured alone.
 *
 * With `atOnce`, each variant is instead loaded at the same time as the one it is compared with
 * (a wrk each, both servers sharing their core), a round per pair, the first round dropped: the
 * ratio then does not move with a host whose load drifts within seconds, which in turns it does
 * (the same build has read metrics on at 0.89 and at 1.10 of metrics off).
 */
import { join } from "node:path"

export interface Measured {
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly cpuUsPerRequest: number
}

interface Server {
  readonly name: string
  readonly url: string
  readonly pid: number
  readonly stop: () => Promise<void>
}

export interface ObservabilityBench {
  readonly root: string
  readonly folder: string
  readonly rounds: number
  readonly loadCore: string
  readonly serviceEnv: Record<string, string>
  readonly copyDatabase: (name: string) => string
  readonly start: (name: string, command: Array<string>, env: Record<string, string>, port: number) => Promise<Server>
  readonly workloads: ReadonlyArray<{ readonly name: string; readonly path: string; readonly script: string }>
  readonly runWrk: (url: string, script: string, onCores: string, pid: number) => Measured
  /** Both targets loaded at the same time, a wrk each. */
  readonly runSideBySide: (
    targets: ReadonlyArray<{ readonly url: string; readonly script: string; readonly pid: number }>,
    onCores: string
  ) => Promise<ReadonlyArray<Measured>>
  readonly atOnce: boolean
  readonly median: (values: ReadonlyArray<number>) => number
}

const sinkPort = 3930
// Nothing listens here: a collector that is down.
const awayPort = 3939

const variants = (sink: string) => [
  { name: "plain", label: "metrics off, tracing off", port: 3931, env: { METRICS_PORT: "off" } },
  { name: "metrics", label: "metrics on (default)", port: 3932, env: { METRICS_PORT: "3942" } },
  {
    name: "sampled",
    label: "tracing, 1% sampled (parentbased_traceidratio 0.01)",
    port: 3933,
    env: { METRICS_PORT: "off", OTEL_EXPORTER_OTLP_ENDPOINT: sink, OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.01" }
  },
  {
    name: "traced",
    label: "tracing, every trace (always_on)",
    port: 3934,
    env: { METRICS_PORT: "off", OTEL_EXPORTER_OTLP_ENDPOINT: sink, OTEL_TRACES_SAMPLER: "always_on" }
  },
  {
    name: "away",
    label: "tracing, every trace (always_on), the collector away (its port refuses connections)",
    port: 3935,
    env: { METRICS_PORT: "off", OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${awayPort}`, OTEL_TRACES_SAMPLER: "always_on" }
  }
] as const

/** The workloads measured: the three, a read by key, a page and a write. */
const measuredWorkloads = new Set(["get by id", "list, limit 20", "create"])

export const measureObservability = async (bench: ObservabilityBench, only?: ReadonlyArray<string>) => {
  const sink = Bun.spawn(["taskset", "-c", bench.loadCore, "bun", "scripts/bench/otlp-sink.ts", String(sinkPort)], {
    cwd: bench.root,
    stdout: "pipe"
  })
  const configured = variants(`http://127.0.0.1:${sinkPort}`).filter((variant) => only === undefined || only.includes(variant.name))
  const servers: Array<Server> = []
  for (const variant of configured) {
    servers.push(
      await bench.start(`observability-${variant.name}`, ["bun", "dist/main.js"], {
        ...bench.serviceEnv,
        PORT: String(variant.port),
        PUBLIC_BASE_URL: `http://localhost:${variant.port}`,
        DATABASE_URL: bench.copyDatabase(`observability-${variant.name}.db`),
        ...variant.env
      }, variant.port)
    )
  }
  const indexOf = (name: string) => configured.findIndex((variant) => variant.name === name)
  // Each variant against the one it is compared with.
  const pairs = ([["metrics", "plain"], ["sampled", "plain"], ["traced", "plain"], ["away", "traced"]] as const)
    .filter(([of, to]) => indexOf(of) !== -1 && indexOf(to) !== -1)
  const rows = []
  for (const workload of bench.workloads.filter((workload) => measuredWorkloads.has(workload.name))) {
    const target = (i: number) => ({ url: servers[i]!.url + workload.path, script: workload.script, pid: servers[i]!.pid })
    const samples = servers.map(() => [] as Array<Measured>)
    const ratios = new Map<string, Array<number>>()
    if (bench.atOnce) {
      // One more round than measured: the first warms both up and is dropped.
      for (let round = 0; round <= bench.rounds; round++) {
        for (const [of, to] of pairs) {
          Bun.sleepSync(500)
          const [measuredOf, measuredTo] = await bench.runSideBySide([target(indexOf(of)), target(indexOf(to))], bench.loadCore)
          if (round === 0) continue
          samples[indexOf(of)]!.push(measuredOf!)
          samples[indexOf(to)]!.push(measuredTo!)
          ratios.set(`${of}/${to}`, [...(ratios.get(`${of}/${to}`) ?? []), measuredOf!.rps / measuredTo!.rps])
        }
      }
    } else {
      for (let i = 0; i < servers.length; i++) bench.runWrk(target(i).url, workload.script, bench.loadCore, servers[i]!.pid)
      for (let round = 0; round < bench.rounds; round++) {
        // Turns alternate (A B C, then C B A), and each run starts after a pause: a server's
        // background work after its run (a collection, an export) falls on no other's figures.
        const order = servers.map((_, i) => i)
        if (round % 2 === 1) order.reverse()
        for (const i of order) {
          Bun.sleepSync(500)
          samples[i]!.push(bench.runWrk(target(i).url, workload.script, bench.loadCore, servers[i]!.pid))
        }
      }
      // The median of each round's own ratio: the host's load drifts between rounds more than within one.
      for (const [of, to] of pairs) {
        const [ofRuns, toRuns] = [samples[indexOf(of)]!, samples[indexOf(to)]!]
        ratios.set(`${of}/${to}`, ofRuns.map((run, i) => run.rps / toRuns[i]!.rps))
      }
    }
    const summary = Object.fromEntries(configured.map((variant, i) => [variant.name, {
      rps: bench.median(samples[i]!.map((s) => s.rps)),
      p99Ms: bench.median(samples[i]!.map((s) => s.p99)),
      cpuUsPerRequest: bench.median(samples[i]!.map((s) => s.cpuUsPerRequest)),
      rounds: samples[i]!
    }])) as unknown as Partial<Record<(typeof configured)[number]["name"], Measured>>
    const ratio = (of: string, to: string) => {
      const found = ratios.get(`${of}/${to}`)
      return found === undefined ? NaN : bench.median(found)
    }
    rows.push({
      workload: workload.name,
      ...summary,
      metricsOfPlain: ratio("metrics", "plain"),
      sampledOfPlain: ratio("sampled", "plain"),
      tracedOfPlain: ratio("traced", "plain"),
      awayOfTraced: ratio("away", "traced")
    })
  }
  for (const server of servers) await server.stop()
  sink.kill("SIGTERM")
  const received = JSON.parse((await new Response(sink.stdout).text()).trim() || "{}") as { exports?: number; bytes?: number }
  return { variants: configured.map(({ env, label, name }) => ({ name, label, env })), atOnce: bench.atOnce, rows, sink: received }
}

export const printObservability = (result: Awaited<ReturnType<typeof measureObservability>>) => {
  const cell = (value: string, width: number) => value.padStart(width)
  console.log(
    `\nobservability, ${result.atOnce ? "each against the one it is compared with, loaded at the same time" : "in the same turns"}: req/s with metrics on against off, and with tracing at 1% ` +
      `(parentbased_traceidratio 0.01) and always_on against tracing off (metrics off in the tracing runs); ` +
      `(× the median of the rounds' own ratios); targets: 1% >= 0.95x, always_on >= 0.6x\n`
  )
  console.log(
    ["workload".padEnd(16), cell("off rps", 8), cell("metrics", 8), cell("×", 5), cell("1%", 7), cell("×", 5), cell("always_on", 10), cell("×", 5), cell("CPU µs/request off/metrics/1%/always_on", 40)].join(" ")
  )
  // A variant left out (`--variants`) prints as a dash.
  const rps = (s: Measured | undefined) => s === undefined ? "–" : s.rps.toFixed(0)
  const times = (value: number) => Number.isNaN(value) ? "–" : value.toFixed(2)
  const cpu = (s: Measured | undefined) => s === undefined ? "–" : s.cpuUsPerRequest.toFixed(0)
  for (const row of result.rows) {
    console.log(
      [
        row.workload.padEnd(16),
        cell(rps(row.plain), 8),
        cell(rps(row.metrics), 8),
        cell(times(row.metricsOfPlain), 5),
        cell(rps(row.sampled), 7),
        cell(times(row.sampledOfPlain), 5),
        cell(rps(row.traced), 10),
        cell(times(row.tracedOfPlain), 5),
        cell([row.plain, row.metrics, row.sampled, row.traced].map(cpu).join(" / "), 40)
      ].join(" ")
    )
  }
  if (result.rows.some((row) => row.away !== undefined && row.traced !== undefined)) {
    console.log(`\nthe collector away (always_on, its port refusing connections) against it taking every export:`)
    for (const row of result.rows) {
      const change = row.away!.cpuUsPerRequest - row.traced!.cpuUsPerRequest
      console.log(
        `  ${row.workload.padEnd(16)} ${rps(row.away)} req/s, ${times(row.awayOfTraced)}×; ` +
          `CPU µs/request ${cpu(row.traced)} → ${cpu(row.away)} (${change >= 0 ? "+" : ""}${change.toFixed(0)})`
      )
    }
  }
  console.log(`\nthe OTLP receiving end took ${result.sink.exports ?? 0} exports, ${((result.sink.bytes ?? 0) / 1e6).toFixed(1)} MB`)
}

export const databaseCopier = (folder: string, copy: (from: string, to: string) => void, seed: string) => (name: string) => {
  const path = join(folder, name)
  copy(seed, path)
  return path
}
