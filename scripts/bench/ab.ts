/**
 * A/B: two commits of the service built side by side and measured in turns on the same
 * workloads, on SQLite and on PostgreSQL. Each commit is extracted (`git archive`) into a folder
 * of its own and built there as `npm start` runs it; both then run at once, each on a copy of one
 * seeded database (SQLite) or on a database of its own in one throwaway cluster (PostgreSQL), and
 * wrk alternates between them (A B, then B A, …), each run after a short pause. The first round is a
 * warm-up and is dropped; the table gives each side's median requests per second and CPU time per
 * request, and B / A as the median of each round's own ratio: a shared host's load drifts from
 * round to round, and a round's two runs, seconds apart, see nearly the same.
 *
 * Usage: bun scripts/bench.ts --ab A B [--rounds N] [--duration SECONDS] [--only sqlite|postgres] [--fresh] [--at-once]
 *   [--workload NAME]
 * (A and B: anything `git rev-parse` reads, or `.` for the working tree as it is; `--fresh`
 * starts both servers anew for each round, below; `--workload get` keeps the workloads whose name
 * has that in it.)
 *
 * `--at-once` loads A and B at the same time instead, a wrk of its own for each (on the load's
 * core, 32 connections each), both servers sharing their core: whatever the host takes from that
 * core at any moment it takes from both, so their ratio does not move with a load that drifts
 * within seconds, which in turns it does (rounds of the same commit against itself have spread
 * from 0.62 to 1.50 that way).
 */
import { Database } from "bun:sqlite"
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startPostgresCluster } from "../../test/support/PostgresCluster.js"
import { args, numberOption } from "../options.js"
import { median, runWrk, runWrkSideBySide, type WrkRun } from "./wrk.js"
import { makeWorkloads } from "./workloads.js"

const root = new URL("../..", import.meta.url).pathname
const at = args.indexOf("--ab")
const refs = [args[at + 1], args[at + 2]] as const
if (refs.some((ref) => ref === undefined || ref.startsWith("--"))) {
  console.error("Usage: bun scripts/bench.ts --ab A B [--rounds N] [--duration SECONDS] [--only sqlite|postgres] [--fresh] [--at-once] [--workload NAME]")
  process.exit(1)
}
// One more round than measured: the first is dropped.
const rounds = numberOption("--rounds", 3) + 1
const duration = numberOption("--duration", 5)
const only = args[args.indexOf("--only") + 1]
const fresh = args.includes("--fresh")
const atOnce = args.includes("--at-once")
const workloadNamed = args.includes("--workload") ? args[args.indexOf("--workload") + 1] : undefined
const cores = navigator.hardwareConcurrency
const serverCore = "0"
const loadCore = cores > 1 ? "1" : "0"

const run = (command: Array<string>, cwd = root, env: Record<string, string> = {}) => {
  const result = Bun.spawnSync(command, { cwd, env: { ...process.env, ...env }, stderr: "pipe", stdout: "pipe" })
  if (result.exitCode !== 0) throw new Error(`${command.join(" ")} failed: ${result.stderr.toString()}`)
  return result.stdout.toString().trim()
}

const folder = mkdtempSync(join(tmpdir(), "petstore-ab-"))
process.on("exit", () => rmSync(folder, { recursive: true, force: true }))

/** The sources of `ref` in a folder of their own, built: the folder, and the commit's short name. */
const checkout = (ref: string, name: string) => {
  const into = join(folder, name)
  mkdirSync(into)
  let label: string
  if (ref === ".") {
    const files = run(["git", "ls-files", "-co", "--exclude-standard", "-z"]).split("\0").filter((f) => f !== "" && existsSync(join(root, f)))
    writeFileSync(join(folder, `${name}.files`), files.join("\0"))
    run(["tar", "--null", "-T", join(folder, `${name}.files`), "-cf", join(folder, `${name}.tar`)])
    label = `${run(["git", "rev-parse", "--short", "HEAD"])}+working tree`
  } else {
    const commit = run(["git", "rev-parse", "--verify", `${ref}^{commit}`])
    run(["git", "archive", "-o", join(folder, `${name}.tar`), commit])
    label = commit.slice(0, 7)
  }
  run(["tar", "-xf", join(folder, `${name}.tar`), "-C", into])
  // The same lockfile shares the installed packages; another is installed as it says.
  if (readFileSync(join(into, "bun.lock"), "utf8") === readFileSync(join(root, "bun.lock"), "utf8")) {
    symlinkSync(join(root, "node_modules"), join(into, "node_modules"))
  } else {
    run(["bun", "install", "--frozen-lockfile"], into)
  }
  run(["bun", "scripts/build.ts", "dist"], into)
  return { name, label, folder: into }
}

const sides = [checkout(refs[0]!, "A"), checkout(refs[1]!, "B")]
console.log(`A = ${sides[0]!.label} (${refs[0]}), B = ${sides[1]!.label} (${refs[1]})`)

interface Server {
  readonly url: string
  readonly pid: number
  readonly stop: () => Promise<void>
}

const start = async (side: (typeof sides)[number], env: Record<string, string>, port: number, key: string): Promise<Server> => {
  const proc = Bun.spawn(["taskset", "-c", serverCore, "bun", "dist/main.js"], {
    cwd: side.folder,
    env: {
      ...process.env,
      PETSTORE_ENV: "production",
      HOST: "127.0.0.1",
      PORT: String(port),
      PUBLIC_BASE_URL: `http://localhost:${port}`,
      // One key carries the whole load: its limit is raised so the limiter is measured, not hit.
      RATE_LIMIT_PER_SECOND: "1000000",
      RATE_LIMIT_BURST: "1000000",
      AUTH_FAILURES_PER_MINUTE: "100000000",
      METRICS_PORT: String(port + 40),
      ...env
    },
    stdout: Bun.file(join(folder, `${side.name}-${port}.log`)),
    stderr: "inherit"
  })
  const url = `http://127.0.0.1:${port}`
  for (;;) {
    const ok = await fetch(`${url}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${key}` } }).then(
      (r) => r.status === 200,
      () => false
    )
    if (ok) break
    if (proc.exitCode !== null) throw new Error(`${side.name} did not start; see ${folder}/${side.name}-${port}.log`)
    await Bun.sleep(10)
  }
  return { url, pid: proc.pid, stop: async () => (proc.kill("SIGTERM"), void (await proc.exited)) }
}

/** The benchmark's workloads (`scripts/bench/workloads.ts`), calling with `key`. */
const workloads = (key: string, tag: string) =>
  makeWorkloads(folder, key, tag).filter(({ name }) => workloadNamed === undefined || name.includes(workloadNamed))

type Pair = readonly [Server, Server]

/** A on `port` and B on the next, each on its database; A is stopped again if B does not start. */
const startPair = async (databaseUrls: readonly [string, string], port: number, key: string): Promise<Pair> => {
  const a = await start(sides[0]!, { DATABASE_URL: databaseUrls[0] }, port, key)
  try {
    return [a, await start(sides[1]!, { DATABASE_URL: databaseUrls[1] }, port + 1, key)]
  } catch (error) {
    await a.stop()
    throw error
  }
}

/**
 * Every workload on both servers in turns; the order of the two alternates from round to round.
 * With `--fresh`, each round starts both servers anew and warms each up on the workload for as
 * long as its run, before it. A process keeps for its life what its start left it (where the JIT
 * and the collector put things), and runs of the same two builds' code have read one workload at
 * 0.99 and at 0.91, so rounds of one pair of processes are not independent samples; rounds of new
 * ones are.
 */
const measure = async (engine: string, databaseUrls: readonly [string, string], port: number, key: string) => {
  const list = workloads(key, engine)
  const runs = list.map((): [Array<WrkRun>, Array<WrkRun>] => [[], []])
  const runPair = async (servers: Pair, w: number, round: number) => {
    const workload = list[w]!
    if (atOnce) {
      const targets = servers.map((server) => ({ url: server.url + workload.path, script: workload.script, pid: server.pid }))
      if (fresh) await runWrkSideBySide(targets, loadCore, duration)
      Bun.sleepSync(500)
      const results = await runWrkSideBySide(targets, loadCore, duration)
      if (round > 0) results.forEach((result, i) => runs[w]![i]!.push(result))
      return
    }
    for (const i of round % 2 === 0 ? [0, 1] : [1, 0]) {
      const server = servers[i]!
      if (fresh) runWrk(server.url + workload.path, workload.script, loadCore, duration)
      // A server's work after its run (a collection, a checkpoint) falls on no other's figures.
      Bun.sleepSync(500)
      const result = runWrk(server.url + workload.path, workload.script, loadCore, duration, [server.pid])
      if (round > 0) runs[w]![i]!.push(result)
    }
  }
  const stopPair = (servers: Pair) => Promise.all(servers.map((server) => server.stop()))
  if (fresh) {
    for (let round = 0; round < rounds; round++) {
      const servers = await startPair(databaseUrls, port, key)
      try {
        for (let w = 0; w < list.length; w++) await runPair(servers, w, round)
      } finally {
        await stopPair(servers)
      }
    }
  } else {
    const servers = await startPair(databaseUrls, port, key)
    try {
      for (let w = 0; w < list.length; w++) for (let round = 0; round < rounds; round++) await runPair(servers, w, round)
    } finally {
      await stopPair(servers)
    }
  }
  return list.map((workload, w) => {
    const [a, b] = runs[w]!.map((side) => ({
      rps: median(side.map((r) => r.rps)),
      cpuUs: median(side.map((r) => r.cpuUsPerRequest)),
      p99Ms: median(side.map((r) => r.p99))
    }))
    const [runsA, runsB] = runs[w]!
    const ratios = (of: (run: WrkRun) => number) => runsB.map((run, i) => of(run) / of(runsA[i]!))
    const rpsRatios = ratios((run) => run.rps)
    return {
      engine,
      workload: workload.name,
      a: a!,
      b: b!,
      ratio: median(rpsRatios),
      // How far the rounds' own ratios spread: the figure is no surer than this.
      lowest: Math.min(...rpsRatios),
      highest: Math.max(...rpsRatios),
      cpuRatio: median(ratios((run) => run.cpuUsPerRequest))
    }
  })
}

// Commits before the entry points moved to src/bin/ have the keys command at src/keys.ts.
const keysCommand = (folder: string) => existsSync(join(folder, "src/bin/keys.ts")) ? "src/bin/keys.ts" : "src/keys.ts"

const createKey = (side: (typeof sides)[number], databaseUrl: string) =>
  run(["bun", keysCommand(side.folder), "create", "--name", "bench"], side.folder, { DATABASE_URL: databaseUrl, PETSTORE_ENV: "production" })
    .split("\n").at(-1)!

const rows: Array<Awaited<ReturnType<typeof measure>>[number]> = []

if (only !== "postgres") {
  // Seeded by A's migrations: B opens a database A made, as an upgrade would.
  const seed = join(folder, "seed.db")
  const key = createKey(sides[0]!, seed)
  const db = new Database(seed)
  const insert = db.query("INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?)")
  const statuses = ["available", "pending", "sold"]
  db.transaction(() => {
    for (let i = 1; i <= 10_000; i++) insert.run(`pet ${i}`, i % 50, i % 10 === 0 ? null : statuses[i % 3]!)
  })()
  db.run("PRAGMA wal_checkpoint(TRUNCATE)")
  db.close()
  for (const side of sides) copyFileSync(seed, join(folder, `${side.name}.db`))
  rows.push(...await measure("SQLite", [join(folder, "A.db"), join(folder, "B.db")], 3951, key))
}

if (only !== "sqlite") {
  const cluster = startPostgresCluster(3960)
  try {
    // The database's processes share wrk's core; the services have theirs, as on SQLite.
    const postmaster = readFileSync(`${cluster.dataDirectory}/postmaster.pid`, "utf8").split("\n")[0]!.trim()
    for (const pid of [postmaster, ...run(["pgrep", "-P", postmaster]).split("\n").filter(Boolean)]) {
      run(["taskset", "-a", "-p", "-c", loadCore, pid])
    }
    const psql = (url: string, statement: string) => run(["psql", url, "-v", "ON_ERROR_STOP=1", "-qc", statement])
    const urls = sides.map((side) => cluster.url.replace(/\/postgres$/, `/petstore_${side.name.toLowerCase()}`))
    for (const url of urls) psql(cluster.url, `CREATE DATABASE ${url.split("/").at(-1)}`)
    // The same key in both: B's database gets A's row, hash included.
    const key = createKey(sides[0]!, urls[0]!)
    const keyRow = run(["psql", urls[0]!, "-Atc", "SELECT name, prefix, key_hash, created_at FROM api_keys"]).split("|")
    createKey(sides[1]!, urls[1]!)
    psql(urls[1]!, `UPDATE api_keys SET key_hash = '${keyRow[2]}', prefix = '${keyRow[1]}'`)
    for (const url of urls) {
      psql(
        url,
        `INSERT INTO pets (name, category_id, status)
         SELECT 'pet ' || i, i % 50, CASE WHEN i % 10 = 0 THEN NULL ELSE (ARRAY['available','pending','sold'])[i % 3 + 1] END
         FROM generate_series(1, 10000) AS i`
      )
      psql(url, "VACUUM ANALYZE")
    }
    rows.push(...await measure("PostgreSQL", [urls[0]!, urls[1]!], 3971, key))
  } finally {
    cluster.stop()
  }
}

const cell = (value: string, width: number) => value.padStart(width)
console.log(
  `\nwrk 1 thread, 32 connections, ${duration}s per run, median of ${rounds - 1} rounds after a dropped one, ` +
    `${atOnce ? "A and B at the same time, a wrk each" : "A and B in turns"}${fresh ? `, new processes each round, each warmed up for ${duration}s before its run` : ""}, ` +
    `B/A the median of the rounds' own ratios; servers on core ${serverCore}, wrk on core ${loadCore}\n`
)
console.log(
  ["engine".padEnd(11), "workload".padEnd(24), cell("A rps", 8), cell("B rps", 8), cell("B/A", 6), cell("rounds", 12), cell("A µs", 7), cell("B µs", 7), cell("µs B/A", 7)].join(" ")
)
for (const row of rows) {
  console.log(
    [
      row.engine.padEnd(11),
      row.workload.padEnd(24),
      cell(row.a.rps.toFixed(0), 8),
      cell(row.b.rps.toFixed(0), 8),
      cell(row.ratio.toFixed(3), 6),
      cell(`${row.lowest.toFixed(2)}–${row.highest.toFixed(2)}`, 12),
      cell(row.a.cpuUs.toFixed(1), 7),
      cell(row.b.cpuUs.toFixed(1), 7),
      cell(row.cpuRatio.toFixed(3), 7)
    ].join(" ")
  )
}
