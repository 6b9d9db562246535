/**
 * Benchmark: the service against a hand-written Bun.serve baseline on copies of one seeded SQLite
 * database, measured with wrk in turns (A B A B …), server on core 0 and wrk on core 1, with the
 * framework floor (`scripts/bench/floor.ts`) in the same turns on get by id; then the service with
 * WORKERS=2, its two processes sharing both cores with wrk; then the service on PostgreSQL, one
 * instance and two (`scripts/bench/postgres.ts`); then what metrics and traces cost
 * (`scripts/bench/observability.ts`).
 *
 * Usage: bun run bench [results.json] [--rounds N] [--duration SECONDS] [--only observability]
 * (`bun run bench` builds dist/main.js first; `bun scripts/bench.ts` uses the build as it is;
 * `--only observability` measures what metrics and traces cost, and nothing else; `--variants
 * plain,sampled` keeps only those of its servers; `--at-once` loads each with the one it is
 * compared with at the same time rather than in turns.)
 * A/B of two commits instead (`scripts/bench/ab.ts`): bun scripts/bench.ts --ab A B [--rounds N]
 * Start to first answer of the executable dist/petstore instead (`scripts/bench/startup.ts`): --startup [--rounds N]
 */
import { Database } from "bun:sqlite"
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { databaseCopier, measureObservability, printObservability } from "./bench/observability.js"
import { args, numberOption } from "./options.js"
import { measurePostgres } from "./bench/postgres.js"
import { median, runWrk as wrk, runWrkSideBySide } from "./bench/wrk.js"
import { makeWorkloads as makeWorkloadsIn } from "./bench/workloads.js"

if (args.includes("--startup")) {
  await import("./bench/startup.js")
  process.exit(0)
}
if (Bun.spawnSync(["sh", "-c", "command -v wrk"]).exitCode !== 0) {
  console.error("wrk is missing. Install it with: sudo apt-get install wrk")
  process.exit(1)
}
if (args.includes("--ab")) {
  await import("./bench/ab.js")
  process.exit(0)
}

const root = new URL("..", import.meta.url).pathname
const rounds = numberOption("--rounds", 3)
const duration = numberOption("--duration", 8)
const output = args.find((arg, i) => !arg.startsWith("--") && !args[i - 1]?.startsWith("--"))
const only = args.includes("--only") ? args[args.indexOf("--only") + 1] : undefined
if (only !== undefined && only !== "observability") {
  console.error(`--only takes observability, not ${only}`)
  process.exit(1)
}
// `--variants plain,sampled`: only these of the observability servers (all five by default).
const variantsOption = args.includes("--variants") ? args[args.indexOf("--variants") + 1]!.split(",") : undefined
const cores = navigator.hardwareConcurrency
const serverCore = "0"
const loadCore = cores > 1 ? "1" : "0"

const folder = mkdtempSync(join(tmpdir(), "petstore-bench-"))
process.on("exit", () => rmSync(folder, { recursive: true, force: true }))

// Seed: the service's own migrations and a production key, then 10,000 pets (a tenth without status).
const seed = join(folder, "seed.db")
const keyRun = Bun.spawnSync(["bun", "src/bin/keys.ts", "create", "--name", "bench"], {
  cwd: root,
  env: { ...process.env, DATABASE_URL: seed, PETSTORE_ENV: "production" }
})
if (keyRun.exitCode !== 0) throw new Error(`Could not create a key: ${keyRun.stderr}`)
const key = keyRun.stdout.toString().trim().split("\n").at(-1)!
{
  const db = new Database(seed)
  const insert = db.query("INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?)")
  const statuses = ["available", "pending", "sold"]
  db.transaction(() => {
    for (let i = 1; i <= 10_000; i++) insert.run(`pet ${i}`, i % 50, i % 10 === 0 ? null : statuses[i % 3]!)
  })()
  db.run("PRAGMA wal_checkpoint(TRUNCATE)")
  db.close()
}

const commitOf = () => Bun.spawnSync(["git", "rev-parse", "--short", "HEAD"], { cwd: root }).stdout.toString().trim()
const settingsOf = () => ({ threads: 1, connections: 32, durationSeconds: duration, rounds, serverCore, loadCore })

const rssKiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1])

interface Server {
  readonly name: string
  readonly url: string
  readonly pid: number
  readonly startupMs: number
  readonly rssAfterStartKiB: number
  readonly stop: () => Promise<void>
}

const start = async (
  name: string,
  command: Array<string>,
  env: Record<string, string>,
  port: number,
  onCores = serverCore,
  readyPath = "/v1/pets?limit=1",
  readyKey = key
): Promise<Server> => {
  const startedAt = performance.now()
  const proc = Bun.spawn(["taskset", "-c", onCores, ...command], {
    cwd: root,
    env: { ...process.env, ...env },
    stdout: Bun.file(join(folder, `${name}.log`)),
    stderr: "inherit"
  })
  const url = `http://127.0.0.1:${port}`
  for (;;) {
    const ok = await fetch(`${url}${readyPath}`, { headers: { authorization: `Bearer ${readyKey}` } }).then(
      (r) => r.status === 200,
      () => false
    )
    if (ok) break
    if (proc.exitCode !== null) throw new Error(`${name} did not start`)
    await Bun.sleep(5)
  }
  const startupMs = performance.now() - startedAt
  return {
    name,
    url,
    pid: proc.pid,
    startupMs,
    rssAfterStartKiB: rssKiB(proc.pid),
    stop: async () => {
      proc.kill("SIGTERM")
      await proc.exited
    }
  }
}

const servicePort = 3901
const baselinePort = 3902
const floorPort = 3903
copyFileSync(seed, join(folder, "service.db"))
copyFileSync(seed, join(folder, "baseline.db"))
// The production build, as `npm start` runs it (`bun run build` makes it).
if (!existsSync(join(root, "dist/main.js"))) throw new Error("dist/main.js is missing: run `bun run build` first")
const serviceEnv = {
  PETSTORE_ENV: "production",
  HOST: "127.0.0.1",
  PORT: String(servicePort),
  PUBLIC_BASE_URL: `http://localhost:${servicePort}`,
  // One key carries the whole load: its limit is raised so the limiter is measured, not hit.
  RATE_LIMIT_PER_SECOND: "1000000",
  RATE_LIMIT_BURST: "1000000",
  AUTH_FAILURES_PER_MINUTE: "100000000",
  // Metrics on, as by default, on a port of the benchmark's own.
  METRICS_PORT: String(servicePort + 40)
}
const makeWorkloads = (apiKey: string, tag: string) => makeWorkloadsIn(folder, apiKey, tag)
const workloads = makeWorkloads(key, "sqlite")

/** One wrk run of the configured duration; with the server's pid, also its CPU time per request. */
const runWrk = (url: string, script: string, onCores = loadCore, pid?: number) =>
  wrk(url, script, onCores, duration, pid === undefined ? [] : [pid])

const observabilityOf = () =>
  measureObservability({
    root,
    folder,
    rounds,
    loadCore,
    serviceEnv,
    copyDatabase: databaseCopier(folder, copyFileSync, seed),
    start: (name, command, env, port) => start(name, command, env, port),
    workloads,
    runWrk,
    runSideBySide: (targets, onCores) => runWrkSideBySide(targets, onCores, duration),
    atOnce: args.includes("--at-once"),
    median
  }, variantsOption)

if (only === "observability") {
  const observability = await observabilityOf()
  const how = args.includes("--at-once") ? "each pair at the same time, a wrk each, after a dropped round" : "A B turns"
  console.log(`\nwrk 1 thread, 32 connections, ${duration}s per run, median of ${rounds} rounds (${how}); servers on core ${serverCore}, wrk on core ${loadCore}`)
  printObservability(observability)
  if (output !== undefined) {
    writeFileSync(output, JSON.stringify({ date: new Date().toISOString(), commit: commitOf(), settings: settingsOf(), observability }, null, 2) + "\n")
    console.log(`\nwrote ${output}`)
  }
  process.exit(0)
}

const service = await start("service", ["bun", "dist/main.js"], {
  ...serviceEnv,
  DATABASE_URL: join(folder, "service.db")
}, servicePort)
const baseline = await start(
  "baseline",
  ["bun", "scripts/bench/baseline.ts", join(folder, "baseline.db"), String(baselinePort)],
  {},
  baselinePort
)
// What the framework costs on its own: an HttpApi handler returning a fixed pet (get by id only).
const floor = await start("floor", ["bun", "scripts/bench/floor.ts", String(floorPort)], {}, floorPort, serverCore, "/v1/pets/1")

/** The servers measured on a workload, in turns; the floor only answers get by id. */
const serversFor = (workload: (typeof workloads)[number]) =>
  workload.name === "get by id" ? [service, baseline, floor] : [service, baseline]

// Warm each up once on every workload, so the first measured round is not a JIT warm-up.
for (const workload of workloads) {
  for (const server of serversFor(workload)) {
    Bun.spawnSync(["taskset", "-c", loadCore, "wrk", "-t1", "-c32", "-d2s", "-s", workload.script, server.url + workload.path])
  }
}

const rows = []
let floorSummary:
  | { rps: number; p50Ms: number; p99Ms: number; cpuUsPerRequest: number; ofBaseline: number; serviceOfFloor: number }
  | undefined
for (const workload of workloads) {
  const samples: Record<string, Array<ReturnType<typeof runWrk>>> = { service: [], baseline: [], floor: [] }
  for (let round = 0; round < rounds; round++) {
    for (const server of serversFor(workload)) {
      samples[server.name]!.push(runWrk(server.url + workload.path, workload.script, loadCore, server.pid))
    }
  }
  const summary = (name: string) => ({
    rps: median(samples[name]!.map((s) => s.rps)),
    p50Ms: median(samples[name]!.map((s) => s.p50)),
    p99Ms: median(samples[name]!.map((s) => s.p99)),
    cpuUsPerRequest: median(samples[name]!.map((s) => s.cpuUsPerRequest)),
    rounds: samples[name]!
  })
  const serviceSummary = summary("service")
  const baselineSummary = summary("baseline")
  rows.push({
    workload: workload.name,
    service: serviceSummary,
    baseline: baselineSummary,
    ratio: serviceSummary.rps / baselineSummary.rps,
    cpuRatio: baselineSummary.cpuUsPerRequest / serviceSummary.cpuUsPerRequest
  })
  if (samples.floor!.length > 0) {
    const { cpuUsPerRequest, p50Ms, p99Ms, rps } = summary("floor")
    floorSummary = {
      rps,
      p50Ms,
      p99Ms,
      cpuUsPerRequest,
      ofBaseline: rps / baselineSummary.rps,
      serviceOfFloor: serviceSummary.rps / rps
    }
  }
}

const rssAfterRunKiB = rssKiB(service.pid)
await service.stop()
await baseline.stop()
await floor.stop()

// WORKERS=2: the supervisor and both workers, and wrk, on every core (there is no core to spare).
const allCores = `0-${cores - 1}`
copyFileSync(seed, join(folder, "workers.db"))
const workers = await start("workers", ["bun", "dist/main.js"], {
  ...serviceEnv,
  DATABASE_URL: join(folder, "workers.db"),
  WORKERS: "2"
}, servicePort, allCores)
const workerRows = rows.map(({ service: single, workload }) => {
  const { path, script } = workloads.find((w) => w.name === workload)!
  runWrk(workers.url + path, script, allCores)
  const runs = Array.from({ length: rounds }, () => runWrk(workers.url + path, script, allCores))
  const rps = median(runs.map((run) => run.rps))
  return {
    workload,
    rps,
    p50Ms: median(runs.map((run) => run.p50)),
    p99Ms: median(runs.map((run) => run.p99)),
    oneWorkerRps: single.rps,
    speedup: rps / single.rps,
    rounds: runs
  }
})
await workers.stop()

const postgres = await measurePostgres({
  root,
  rounds,
  duration,
  serverCore,
  loadCore,
  clusterPort: 3910,
  servicePorts: [3911, 3912],
  serviceEnv,
  start: (name, command, env, port, onCores, apiKey) => start(name, command, env, port, onCores, undefined, apiKey),
  workloads: (apiKey) => makeWorkloads(apiKey, "postgres")
})
const sqliteRps = new Map(rows.map((row) => [row.workload, row.service.rps]))
const postgresRows = postgres.map(({ oneInstance, twoInstances, workload }) => {
  return {
    workload,
    oneInstance,
    twoInstances,
    ofSqlite: oneInstance.rps / sqliteRps.get(workload)!,
    twoInstancesCpu: twoInstances.cpuUsPerRequest / oneInstance.cpuUsPerRequest
  }
})

const observability = await observabilityOf()

const cell = (value: string, width: number) => value.padStart(width)
console.log(
  `\nwrk 1 thread, 32 connections, ${duration}s per run, median of ${rounds} rounds (A B turns); ` +
    `servers on core ${serverCore}, wrk on core ${loadCore}\n`
)
console.log(
  ["workload".padEnd(26), cell("service rps", 12), cell("baseline rps", 13), cell("ratio", 7), cell("p50 ms", 8), cell("p99 ms", 8), cell("base p50", 9), cell("base p99", 9)].join(" ")
)
for (const row of rows) {
  console.log(
    [
      row.workload.padEnd(26),
      cell(row.service.rps.toFixed(0), 12),
      cell(row.baseline.rps.toFixed(0), 13),
      cell(row.ratio.toFixed(2), 7),
      cell(row.service.p50Ms.toFixed(2), 8),
      cell(row.service.p99Ms.toFixed(2), 8),
      cell(row.baseline.p50Ms.toFixed(2), 9),
      cell(row.baseline.p99Ms.toFixed(2), 9)
    ].join(" ")
  )
}
console.log("\nserver CPU time (user + system) per request, median of the same runs\n")
console.log(["workload".padEnd(26), cell("service µs", 11), cell("baseline µs", 12), cell("baseline / service", 19)].join(" "))
for (const row of rows) {
  console.log(
    [
      row.workload.padEnd(26),
      cell(row.service.cpuUsPerRequest.toFixed(1), 11),
      cell(row.baseline.cpuUsPerRequest.toFixed(1), 12),
      cell(row.cpuRatio.toFixed(2), 19)
    ].join(" ")
  )
}
if (floorSummary === undefined) throw new Error("the floor was not measured")
console.log(
  `\nframework floor, get by id (an HttpApi handler returning a fixed pet: no key, no database): ` +
    `${floorSummary.rps.toFixed(0)} rps, ${floorSummary.ofBaseline.toFixed(2)} of the baseline; ` +
    `the service's get by id is ${floorSummary.serviceOfFloor.toFixed(2)} of it; ` +
    `${floorSummary.cpuUsPerRequest.toFixed(1)} µs of CPU per request`
)
console.log(
  `\nWORKERS=2: the service's two processes and wrk share the machine's ${cores} cores (wrk takes a large ` +
    `part of one), so this is what a second worker adds beside a load generator, not twice one core\n`
)
console.log(["workload".padEnd(26), cell("2 workers rps", 14), cell("1 worker rps", 13), cell("x", 6), cell("p50 ms", 8), cell("p99 ms", 8)].join(" "))
for (const row of workerRows) {
  console.log(
    [
      row.workload.padEnd(26),
      cell(row.rps.toFixed(0), 14),
      cell(row.oneWorkerRps.toFixed(0), 13),
      cell(row.speedup.toFixed(2), 6),
      cell(row.p50Ms.toFixed(2), 8),
      cell(row.p99Ms.toFixed(2), 8)
    ].join(" ")
  )
}
console.log(
  `\nPostgreSQL (a throwaway cluster as the tests make it, its processes on core ${loadCore} with wrk; the ` +
    `service on core ${serverCore}); ratio to the service on SQLite in this run\n`
)
console.log(
  ["workload".padEnd(26), cell("rps", 8), cell("of SQLite", 10), cell("µs/request", 11), cell("p50 ms", 8), cell("p99 ms", 8), cell("2 inst. rps", 12), cell("2 inst. µs", 11), cell("µs ×", 6)].join(" ")
)
for (const row of postgresRows) {
  console.log(
    [
      row.workload.padEnd(26),
      cell(row.oneInstance.rps.toFixed(0), 8),
      cell(row.ofSqlite.toFixed(2), 10),
      cell(row.oneInstance.cpuUsPerRequest.toFixed(1), 11),
      cell(row.oneInstance.p50Ms.toFixed(2), 8),
      cell(row.oneInstance.p99Ms.toFixed(2), 8),
      cell(row.twoInstances.rps.toFixed(0), 12),
      cell(row.twoInstances.cpuUsPerRequest.toFixed(1), 11),
      cell(row.twoInstancesCpu.toFixed(2), 6)
    ].join(" ")
  )
}
const memory = {
  rssAfterStartMiB: service.rssAfterStartKiB / 1024,
  rssAfterRunMiB: rssAfterRunKiB / 1024,
  growth: rssAfterRunKiB / service.rssAfterStartKiB
}
console.log(
  `\nservice memory: ${memory.rssAfterStartMiB.toFixed(1)} MiB after start, ${memory.rssAfterRunMiB.toFixed(1)} MiB after the run ` +
    `(${memory.growth.toFixed(2)}x)`
)
console.log(`service start to first successful request: ${service.startupMs.toFixed(0)} ms (baseline ${baseline.startupMs.toFixed(0)} ms)`)
printObservability(observability)

if (output !== undefined) {
  writeFileSync(
    output,
    JSON.stringify(
      {
        date: new Date().toISOString(),
        commit: commitOf(),
        settings: settingsOf(),
        workloads: rows,
        frameworkFloor: floorSummary,
        twoWorkers: workerRows,
        postgres: postgresRows,
        observability,
        memory,
        startupMs: { service: service.startupMs, baseline: baseline.startupMs }
      },
      null,
      2
    ) + "\n"
  )
  console.log(`\nwrote ${output}`)
}
