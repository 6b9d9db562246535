/** Loading servers with wrk, reading their CPU time from /proc, and comparing them round by round. */
import { readFileSync } from "node:fs"
import {
  atOnce,
  duration,
  fresh,
  loadCore,
  rounds,
  type Server,
  serverCore,
  startServer,
  warmUp,
  type Workload
} from "./setup.js"

type Target = { readonly url: string; readonly script: string; readonly pids: ReadonlyArray<number> }

/** A workload on a server, watching the CPU of the server and of the processes it started (WORKERS). */
const target = (server: Server, workload: Workload): Target => {
  const children = Bun.spawnSync(["pgrep", "-P", String(server.pid)]).stdout.toString().split("\n").filter(Boolean).map(
    Number
  )
  return { url: server.url + workload.path, script: workload.script, pids: [server.pid, ...children] }
}

// /proc counts CPU time in clock ticks: fields 14 and 15 of /proc/PID/stat, user and system.
const ticksPerSecond = Number(Bun.spawnSync(["getconf", "CLK_TCK"]).stdout.toString().trim()) || 100
const cpuMicros = (pids: ReadonlyArray<number>) =>
  pids.reduce((sum, pid) => {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return sum + ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / ticksPerSecond
  }, 0)

const parse = (text: string) => {
  const latencyMs = (percentile: string) => {
    const match = new RegExp(`\\s${percentile}%\\s+([\\d.]+)(us|ms|s)`).exec(text)
    return match ? Number(match[1]) * { us: 0.001, ms: 1, s: 1000 }[match[2] as "us" | "ms" | "s"] : NaN
  }
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(text)?.[1]),
    p50: latencyMs("50"),
    p99: latencyMs("99"),
    requests: Number(/(\d+) requests in/.exec(text)?.[1])
  }
}

/** A run's figures, with the servers' CPU time (user and system) per request in µs. */
export type Measure = ReturnType<typeof parse> & { readonly cpuUs: number }

/**
 * wrk (1 thread, `connections` connections, the run's duration) on every target at the same
 * moment, from `cores`: each target's figures, with its servers' CPU time per request.
 */
export const load = async (
  targets: ReadonlyArray<Target>,
  connections = 32,
  cores = loadCore,
  seconds = duration
): Promise<Array<Measure>> => {
  const before = targets.map(({ pids }) => cpuMicros(pids))
  const outputs = await Promise.all(targets.map(({ script, url }) => {
    const command = [
      "taskset",
      "-c",
      cores,
      "wrk",
      "-t1",
      `-c${connections}`,
      `-d${seconds}s`,
      "--latency",
      "-s",
      script,
      url
    ]
    return new Response(Bun.spawn(command, { stdout: "pipe" }).stdout).text()
  }))
  return outputs.map((output, i) => {
    const run = parse(output)
    return { ...run, cpuUs: (cpuMicros(targets[i]!.pids) - before[i]!) / run.requests }
  })
}

export const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** The median of each figure over a series of runs. */
export const summary = (runs: ReadonlyArray<Measure>) => {
  const of = (figure: (run: Measure) => number) => median(runs.map(figure))
  return {
    rps: of((run) => run.rps),
    p50: of((run) => run.p50),
    p99: of((run) => run.p99),
    cpuUs: of((run) => run.cpuUs),
    rounds: runs
  }
}

/** Runs over the same seconds taken as one: requests added up, the worst latency, CPU per request over all. */
const together = (runs: Array<Measure>): Measure => {
  const sum = (figure: (run: Measure) => number) => runs.reduce((total, run) => total + figure(run), 0)
  const worst = (figure: (run: Measure) => number) => Math.max(...runs.map(figure))
  const requests = sum((run) => run.requests)
  const cpuUs = sum((run) => run.cpuUs * run.requests) / requests
  return { rps: sum((run) => run.rps), p50: worst((run) => run.p50), p99: worst((run) => run.p99), requests, cpuUs }
}

/**
 * Each workload's medians over `rounds` runs, after one more that warms up and is dropped: the
 * servers loaded together from `cores`, the 32 connections split between them, their runs as one.
 */
export const perWorkload = async (list: Array<Workload>, servers: Array<Server>, cores = loadCore) => {
  const rows = []
  for (const workload of list) {
    const runs: Array<Measure> = []
    for (let round = 0; round <= rounds; round++) {
      runs.push(together(await load(servers.map((server) => target(server, workload)), 32 / servers.length, cores)))
    }
    rows.push({ workload: workload.name, ...summary(runs.slice(1)) })
  }
  return rows
}

export type Compared = Awaited<ReturnType<typeof compare>>[number]

/** A server to start for a comparison: its name, its settings, and the build's folder (this one by default). */
export type Spec = { readonly name: string; readonly env: Record<string, string>; readonly cwd?: string }

/**
 * Servers compared by pairs (by name: `of` against `to`) on each workload, over `rounds` rounds
 * after a dropped one. In turns, every server runs once a round, the order reversed every other
 * round; with `--at-once`, each pair is loaded at the same moment, a wrk of its own for each, both
 * servers sharing their core, so a host whose load drifts within seconds takes from both alike. A
 * pair's × is the median of the rounds' own ratios. With `--fresh`, each round starts the servers
 * anew and warms each up for as long as its run: a process keeps for its life what its start left
 * it, so only new processes make independent rounds. `--warm-up S` loads each started alone, S s a workload.
 */
export const compare = async (
  engine: string,
  key: string,
  specs: Array<Spec>,
  named: Array<readonly [string, string]>,
  list: Array<Workload>
) => {
  const start = async () => {
    const servers = []
    for (const [i, { cwd, env, name }] of specs.entries()) {
      servers.push(await startServer(name, 3931 + i, key, env, { cwd }))
    }
    if (warmUp > 0) {
      for (const server of servers) {
        for (const workload of list) await load([target(server, workload)], 32, loadCore, warmUp)
      }
    }
    return servers
  }
  const index = (name: string) => specs.findIndex((spec) => spec.name === name)
  const pairs = named.filter(([of, to]) => index(of) !== -1 && index(to) !== -1).map((
    [of, to]
  ) => [index(of), index(to)])
  // By workload, then by round: each pair's two runs.
  const measured = list.map((): Array<Array<readonly [Measure, Measure]>> => [])
  let servers = await start()
  try {
    for (let round = 0; round <= rounds; round++) {
      if (fresh && round > 0) {
        for (const server of servers) await server.stop()
        servers = await start()
      }
      for (const [w, workload] of list.entries()) {
        const measure = async (indices: ReadonlyArray<number>) => {
          const targets = indices.map((i) => target(servers[i]!, workload))
          if (fresh) await load(targets)
          // A server's work after its run (a collection, a checkpoint) falls on no other's figures.
          await Bun.sleep(500)
          return load(targets)
        }
        const byPair: Array<readonly [Measure, Measure]> = []
        if (atOnce) {
          for (const pair of pairs) byPair.push((await measure(pair)) as [Measure, Measure])
        } else {
          const order = servers.map((_, i) => i)
          if (round % 2 === 1) order.reverse()
          const alone: Array<Measure> = []
          for (const i of order) alone[i] = (await measure([i]))[0]!
          for (const [of, to] of pairs) byPair.push([alone[of]!, alone[to]!])
        }
        if (round > 0) measured[w]!.push(byPair)
      }
    }
  } finally {
    for (const server of servers) await server.stop()
  }
  return list.flatMap((workload, w) =>
    pairs.map(([of, to], p) => {
      const runs = measured[w]!.map((byPair) => byPair[p]!)
      const ratios = (figure: (run: Measure) => number) => runs.map(([a, b]) => figure(a) / figure(b))
      const rpsRatios = ratios((run) => run.rps)
      return {
        engine,
        workload: workload.name,
        pair: `${servers[of]!.name}/${servers[to]!.name}`,
        of: summary(runs.map(([a]) => a)),
        to: summary(runs.map(([, b]) => b)),
        // The median of the rounds' own ratios, and how far they spread: the figure is no surer than that.
        ratio: median(rpsRatios),
        lowest: Math.min(...rpsRatios),
        highest: Math.max(...rpsRatios),
        cpuRatio: median(ratios((run) => run.cpuUs))
      }
    })
  )
}

/** A table on stdout, its first `textColumns` columns aligned left and the rest right. */
export const printTable = (title: string, header: Array<string>, rows: Array<Array<string>>, textColumns = 1) => {
  const widths = header.map((name, c) => Math.max(name.length, ...rows.map((row) => row[c]!.length)))
  console.log(`\n${title}\n`)
  for (const row of [header, ...rows]) {
    console.log(
      row.map((cell, c) => (c < textColumns ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join("  ")
    )
  }
}

export const fixed = (value: number, digits: number) => (Number.isNaN(value) ? "–" : value.toFixed(digits))

export const printComparison = (rows: ReadonlyArray<Compared>) =>
  printTable(
    `wrk 1 thread, 32 connections, ${duration} s a run, medians of ${rounds} rounds after a dropped one, ` +
      `${atOnce ? "each pair loaded at once, a wrk each" : "in turns"}${fresh ? ", new processes each round" : ""}; ` +
      `× is the median of the rounds' own ratios; servers on core ${serverCore}, wrk on core ${loadCore}`,
    ["engine", "workload", "X/Y", "X rps", "Y rps", "×", "rounds", "X µs/req", "Y µs/req", "µs ×"],
    rows.map((row) => [
      row.engine,
      row.workload,
      row.pair,
      fixed(row.of.rps, 0),
      fixed(row.to.rps, 0),
      fixed(row.ratio, 3),
      `${fixed(row.lowest, 2)}–${fixed(row.highest, 2)}`,
      fixed(row.of.cpuUs, 1),
      fixed(row.to.cpuUs, 1),
      fixed(row.cpuRatio, 3)
    ]),
    3
  )
