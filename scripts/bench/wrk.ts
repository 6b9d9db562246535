/** Running wrk and reading its figures, with the CPU time the servers spent meanwhile. */
import { readFileSync } from "node:fs"

export interface WrkRun {
  readonly rps: number
  readonly p50: number
  readonly p99: number
  /** Server CPU time (user and system) per request, in µs; NaN when no server was watched. */
  readonly cpuUsPerRequest: number
  readonly requests: number
  readonly non2xx: number
}

/** CPU time (user and system) a process has used, in µs; /proc counts it in clock ticks. */
const clockTicksPerSecond = Number(Bun.spawnSync(["getconf", "CLK_TCK"]).stdout.toString().trim()) || 100
export const cpuMicros = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
  return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / clockTicksPerSecond
}
const cpuOf = (pids: ReadonlyArray<number>) => pids.reduce((sum, pid) => sum + cpuMicros(pid), 0)

const toMs = (value: string, unit: string) => Number(value) * ({ us: 0.001, ms: 1, s: 1000 } as Record<string, number>)[unit]!

const parse = (text: string) => {
  const latency = (p: string) => {
    const match = new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s)`).exec(text)
    return match ? toMs(match[1]!, match[2]!) : NaN
  }
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(text)?.[1]),
    p50: latency("50"),
    p99: latency("99"),
    requests: Number(/(\d+) requests in/.exec(text)?.[1]),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(text)?.[1] ?? 0)
  }
}

const command = (url: string, script: string, onCores: string, seconds: number, connections: number) => [
  "taskset", "-c", onCores,
  "wrk", "-t1", `-c${connections}`, `-d${seconds}s`, "--latency", "-s", script, url
]

/** One wrk run (1 thread, 32 connections); with the servers' pids, their CPU time per request. */
export const runWrk = (
  url: string,
  script: string,
  onCores: string,
  seconds: number,
  pids: ReadonlyArray<number> = []
): WrkRun => {
  const cpuBefore = cpuOf(pids)
  const run = parse(Bun.spawnSync(command(url, script, onCores, seconds, 32)).stdout.toString())
  return { ...run, cpuUsPerRequest: pids.length === 0 ? NaN : (cpuOf(pids) - cpuBefore) / run.requests }
}

/** wrk on each target at the same moment, with `connections` each; each run's figures, in order. */
const runAtOnce = (
  targets: ReadonlyArray<{ readonly url: string; readonly script: string }>,
  onCores: string,
  seconds: number,
  connections: number
) =>
  Promise.all(targets.map(({ script, url }) => {
    const proc = Bun.spawn(command(url, script, onCores, seconds, connections), { stdout: "pipe" })
    return new Response(proc.stdout).text().then(parse)
  }))

/**
 * wrk on several servers at once, the 32 connections split between them: requests per second
 * added up, the worst of their latencies, and the CPU time of every server per request.
 */
export const runWrkTogether = async (
  targets: ReadonlyArray<{ readonly url: string; readonly script: string; readonly pid: number }>,
  onCores: string,
  seconds: number
): Promise<WrkRun> => {
  const pids = targets.map((target) => target.pid)
  const cpuBefore = cpuOf(pids)
  const outputs = await runAtOnce(targets, onCores, seconds, 32 / targets.length)
  const cpu = cpuOf(pids) - cpuBefore
  const requests = outputs.reduce((sum, run) => sum + run.requests, 0)
  return {
    rps: outputs.reduce((sum, run) => sum + run.rps, 0),
    p50: Math.max(...outputs.map((run) => run.p50)),
    p99: Math.max(...outputs.map((run) => run.p99)),
    requests,
    non2xx: outputs.reduce((sum, run) => sum + run.non2xx, 0),
    cpuUsPerRequest: cpu / requests
  }
}

/**
 * Several servers each loaded by a wrk of its own (1 thread, 32 connections) over the same
 * seconds: each server's run, with its own CPU time per request. Sharing one core, the servers
 * share whatever the host gives it at each moment, so their ratio is not moved by the host's load.
 */
export const runWrkSideBySide = async (
  targets: ReadonlyArray<{ readonly url: string; readonly script: string; readonly pid: number }>,
  onCores: string,
  seconds: number
): Promise<Array<WrkRun>> => {
  const cpuBefore = targets.map((target) => cpuMicros(target.pid))
  const outputs = await runAtOnce(targets, onCores, seconds, 32)
  return outputs.map((run, i) => ({ ...run, cpuUsPerRequest: (cpuMicros(targets[i]!.pid) - cpuBefore[i]!) / run.requests }))
}

export const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
