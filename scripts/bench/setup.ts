/** What every mode of the benchmark shares: its options, a temporary folder, seeded stores, servers. */
import type { Subprocess } from "bun"
import { Database } from "bun:sqlite"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"

export const root = new URL("../..", import.meta.url).pathname

// Unknown options, and options without their value, are refused with parseArgs' own message.
const text = { type: "string" } as const
const flag = { type: "boolean" } as const
const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: text,
    duration: text,
    "warm-up": text,
    only: text,
    workload: text,
    variants: text,
    pets: text,
    requests: text,
    ab: flag,
    "at-once": flag,
    fresh: flag,
    move: flag,
    startup: flag,
    bounds: flag,
    "address-flood": flag
  }
})
export const has = (name: keyof typeof values) => values[name] === true
export const option = (name: keyof typeof values) => values[name] as string | undefined
export const numberOption = (name: keyof typeof values, fallback: number) => Number(option(name) ?? fallback)
// `--ab A B [results.json]`: the two commits are the first words after the options.
export const abRefs = has("ab") ? positionals.slice(0, 2) as [string, string] : undefined
const output = positionals[abRefs === undefined ? 0 : 2]
if (abRefs !== undefined && abRefs.length < 2) throw new Error("--ab takes two commits: --ab A B")
export const only = option("only")
if (only !== undefined && !["sqlite", "postgres", ...(abRefs === undefined ? ["observability"] : [])].includes(only)) {
  throw new Error(`--only takes sqlite, postgres${abRefs === undefined ? " or observability" : ""}, not ${only}`)
}
export const rounds = numberOption("rounds", has("startup") ? 10 : 3)
export const duration = numberOption("duration", 5)
export const warmUp = numberOption("warm-up", 0)
export const atOnce = has("at-once")
export const fresh = has("fresh")

export const folder = mkdtempSync(join(tmpdir(), "petstore-bench-"))
const running = new Set<Subprocess>()
process.on("exit", () => {
  for (const proc of running) proc.kill()
  rmSync(folder, { recursive: true, force: true })
})

// The server on one core, the load (wrk, this process, PostgreSQL) on the other.
const cores = navigator.hardwareConcurrency
export const serverCore = "0"
export const loadCore = cores > 1 ? "1" : "0"
export const allCores = `0-${cores - 1}`

export const run = (command: Array<string>, cwd = root, env: Record<string, string> = {}) => {
  const result = Bun.spawnSync(command, { cwd, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" })
  if (result.exitCode !== 0) throw new Error(`${command.join(" ")} failed: ${result.stderr.toString()}`)
  return result.stdout.toString().trim()
}

/** This process and what it starts from now on (wrk, a PostgreSQL cluster) onto the load's core. */
export const pinToLoadCore = () => run(["taskset", "-a", "-p", "-c", loadCore, String(process.pid)])

/** `count` pets, statuses mixed and a tenth without: one statement that SQLite and PostgreSQL both run. */
const petsInsert = (count = 10_000) =>
  `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count}) ` +
  "INSERT INTO pets (name, category_id, status) SELECT 'pet ' || i, i % 50, " +
  "CASE WHEN i % 10 = 0 THEN NULL WHEN i % 3 = 0 THEN 'available' WHEN i % 3 = 1 THEN 'pending' ELSE 'sold' END FROM n"

/** A production key made by the keys command of the sources in `cwd`, which migrates the store first. */
export const createKey = (databaseUrl: string, cwd = root) => {
  const env = { DATABASE_URL: databaseUrl, PETSTORE_ENV: "production" }
  return run(["bun", "src/bin/keys.ts", "create", "--name", "bench"], cwd, env).split("\n").at(-1)!
}

/** A SQLite store at `path` migrated by the sources in `cwd`, with a key (returned) and `count` pets. */
export const seedSqlite = (path: string, cwd = root, count = 10_000) => {
  const key = createKey(path, cwd)
  const db = new Database(path)
  db.run(petsInsert(count))
  // Everything in the main file, so that a copy of the file is the whole store.
  db.run("PRAGMA wal_checkpoint(TRUNCATE)")
  db.close()
  return key
}

export const psql = (url: string, statement: string) => run(["psql", url, "-v", "ON_ERROR_STOP=1", "-qc", statement])

/** A new database `name` in the cluster whose `postgres` database is at `clusterUrl`: its URL. */
export const createDatabase = (clusterUrl: string, name: string) => {
  psql(clusterUrl, `CREATE DATABASE ${name}`)
  return clusterUrl.replace(/\/postgres$/, `/${name}`)
}

/** A database `name` in a cluster, seeded as `seedSqlite` seeds a file: its URL and the key. */
export const seedPostgres = (clusterUrl: string, name: string, cwd = root) => {
  const url = createDatabase(clusterUrl, name)
  const key = createKey(url, cwd)
  psql(url, petsInsert())
  psql(url, "VACUUM ANALYZE")
  return { url, key }
}

/** A workload: its path, and a wrk script calling with the key. */
export type Workload = { readonly name: string; readonly path: string; readonly script: string }

/** The workloads (with `--workload`, those whose name contains its text), calling with `key`. */
export const workloads = (key: string, tag: string): Array<Workload> => {
  const lua = (name: string, body: string) => {
    const path = join(folder, `${name}-${tag}.lua`)
    writeFileSync(path, body)
    return path
  }
  const auth = `wrk.headers["Authorization"] = "Bearer ${key}"\n`
  const randomId = `request = function() return wrk.format("GET", "/v1/pets/" .. math.random(1, 10000)) end\n`
  const create = `wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n` +
    `wrk.body = '{"name":"Bench","categoryId":7,"status":"pending"}'\n`
  return [
    { name: "list, limit 20", path: "/v1/pets?limit=20", script: lua("list20", auth) },
    { name: "list, limit 100, status", path: "/v1/pets?limit=100&status=available", script: lua("list100", auth) },
    { name: "get by id", path: "/v1/pets/1", script: lua("get", auth + randomId) },
    { name: "create", path: "/v1/pets", script: lua("create", auth + create) },
    { name: "401 without key", path: "/v1/pets", script: lua("unauthorized", "") }
  ].filter(({ name }) => option("workload") === undefined || name.includes(option("workload")!))
}

export type Server = {
  readonly name: string
  readonly url: string
  readonly pid: number
  readonly stop: () => Promise<number>
}
type StartOptions = { readonly command?: Array<string>; readonly cores?: string; readonly cwd?: string | undefined }

/** `command` (the build in `cwd` as `npm start` runs it, by default) on `cores`, once it lists pets with `key`. */
export const startServer = async (
  name: string,
  port: number,
  key: string,
  env: Record<string, string>,
  options: StartOptions = {}
) => {
  const { command = ["bun", "dist/main.js"], cores = serverCore, cwd = root } = options
  const proc = Bun.spawn(["taskset", "-c", cores, ...command], {
    cwd,
    env: {
      ...process.env,
      PETSTORE_ENV: "production",
      HOST: "127.0.0.1",
      PORT: String(port),
      PUBLIC_BASE_URL: `http://localhost:${port}`,
      // One key carries the whole load: its limits are raised so the limiter is measured, not hit.
      RATE_LIMIT_PER_SECOND: "1000000",
      RATE_LIMIT_BURST: "1000000",
      AUTH_FAILURES_PER_MINUTE: "100000000",
      // Metrics on, as by default, on a port of the server's own; no load balancer to wait for at a stop.
      METRICS_PORT: String(port + 40),
      STOP_GRACE_SECONDS: "0",
      ...env
    },
    stdout: Bun.file(join(folder, `${name}-${port}.log`)),
    stderr: "inherit"
  })
  running.add(proc)
  const url = `http://127.0.0.1:${port}`
  const answers = () =>
    fetch(`${url}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${key}` } }).then(
      (r) => r.status === 200,
      () => false
    )
  while (!(await answers())) {
    if (proc.exitCode !== null) throw new Error(`${name} did not start (its log is in ${folder})`)
    await Bun.sleep(2)
  }
  const stop = () => {
    running.delete(proc)
    proc.kill("SIGTERM")
    return proc.exited
  }
  return { name, url, pid: proc.pid, stop } satisfies Server
}

/** Resident memory of a process, in MiB. */
export const rssMiB = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024

/** With a file named on the command line, the results written there as JSON, with the run's settings. */
export const writeResults = (mode: string, results: unknown) => {
  if (output === undefined) return
  const commit = run(["git", "rev-parse", "--short", "HEAD"])
  const settings = {
    threads: 1,
    connections: 32,
    durationSeconds: duration,
    rounds,
    atOnce,
    fresh,
    serverCore,
    loadCore
  }
  writeFileSync(
    output,
    JSON.stringify({ date: new Date().toISOString(), commit, mode, settings, results }, null, 2) + "\n"
  )
  console.log(`\nwrote ${output}`)
}
