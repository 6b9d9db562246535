/**
 * The benchmark's PostgreSQL table: a throwaway cluster made as the tests make it, seeded like the
 * SQLite database, then the service on it, one instance and two instances at once, on the same
 * workloads.
 */
import { readFileSync } from "node:fs"
import { startPostgresCluster } from "../../test/support/PostgresCluster.js"
import { median, runWrk, runWrkTogether, type WrkRun } from "./wrk.js"

export interface PostgresBench {
  readonly root: string
  readonly rounds: number
  readonly duration: number
  readonly serverCore: string
  readonly loadCore: string
  readonly clusterPort: number
  readonly servicePorts: readonly [number, number]
  readonly serviceEnv: Record<string, string>
  /** Starts a server and waits until it answers a request with `key`. */
  readonly start: (
    name: string,
    command: Array<string>,
    env: Record<string, string>,
    port: number,
    onCores: string,
    key: string
  ) => Promise<{ readonly url: string; readonly pid: number; readonly stop: () => Promise<void> }>
  /** The workloads' wrk scripts, calling with `key`. */
  readonly workloads: (key: string) => ReadonlyArray<{ readonly name: string; readonly path: string; readonly script: string }>
}

const psql = (url: string, statement: string) => {
  const result = Bun.spawnSync(["psql", url, "-v", "ON_ERROR_STOP=1", "-qc", statement])
  if (result.exitCode !== 0) throw new Error(`psql failed: ${result.stderr}`)
}

/** Moves the cluster's processes, and those it starts later (they inherit it), onto `cores`. */
const pinCluster = (dataDirectory: string, cores: string) => {
  const postmaster = readFileSync(`${dataDirectory}/postmaster.pid`, "utf8").split("\n")[0]!.trim()
  const children = Bun.spawnSync(["pgrep", "-P", postmaster]).stdout.toString().trim().split("\n").filter(Boolean)
  for (const pid of [postmaster, ...children]) Bun.spawnSync(["taskset", "-a", "-p", "-c", cores, pid])
}

const summary = (runs: ReadonlyArray<WrkRun>) => ({
  rps: median(runs.map((run) => run.rps)),
  p50Ms: median(runs.map((run) => run.p50)),
  p99Ms: median(runs.map((run) => run.p99)),
  cpuUsPerRequest: median(runs.map((run) => run.cpuUsPerRequest)),
  rounds: runs
})

export const measurePostgres = async (bench: PostgresBench) => {
  const cluster = startPostgresCluster(bench.clusterPort)
  const running: Array<{ readonly stop: () => Promise<void> }> = []
  try {
    // The database's processes share wrk's core, and the service has its core to itself, as on SQLite.
    pinCluster(cluster.dataDirectory, bench.loadCore)
    const url = cluster.url.replace(/\/postgres$/, "/petstore_bench")
    psql(cluster.url, "CREATE DATABASE petstore_bench")
    const keyRun = Bun.spawnSync(["bun", "src/bin/keys.ts", "create", "--name", "bench"], {
      cwd: bench.root,
      env: { ...process.env, DATABASE_URL: url, PETSTORE_ENV: "production" }
    })
    if (keyRun.exitCode !== 0) throw new Error(`Could not create a key: ${keyRun.stderr}`)
    const key = keyRun.stdout.toString().trim().split("\n").at(-1)!
    psql(
      url,
      `INSERT INTO pets (name, category_id, status)
       SELECT 'pet ' || i, i % 50, CASE WHEN i % 10 = 0 THEN NULL ELSE (ARRAY['available','pending','sold'])[i % 3 + 1] END
       FROM generate_series(1, 10000) AS i`
    )
    psql(url, "VACUUM ANALYZE")
    const workloads = bench.workloads(key)
    const instance = (port: number) =>
      bench.start(`postgres-${port}`, ["bun", "dist/main.js"], {
        ...bench.serviceEnv,
        PORT: String(port),
        METRICS_PORT: String(port + 40),
        DATABASE_URL: url
      }, port, bench.serverCore, key)

    const one = await instance(bench.servicePorts[0])
    running.push(one)
    const single = workloads.map((workload) => {
      runWrk(one.url + workload.path, workload.script, bench.loadCore, 2)
      const runs = Array.from(
        { length: bench.rounds },
        () => runWrk(one.url + workload.path, workload.script, bench.loadCore, bench.duration, [one.pid])
      )
      return summary(runs)
    })
    // A second instance on the same database and core: the same load split over both.
    const two = await instance(bench.servicePorts[1])
    running.push(two)
    const pair: Array<ReturnType<typeof summary>> = []
    for (const workload of workloads) {
      const targets = [one, two].map((server) => ({ url: server.url + workload.path, script: workload.script, pid: server.pid }))
      await runWrkTogether(targets, bench.loadCore, 2)
      const runs: Array<WrkRun> = []
      for (let round = 0; round < bench.rounds; round++) runs.push(await runWrkTogether(targets, bench.loadCore, bench.duration))
      pair.push(summary(runs))
    }
    return workloads.map((workload, i) => ({ workload: workload.name, oneInstance: single[i]!, twoInstances: pair[i]! }))
  } finally {
    await Promise.all(running.map((server) => server.stop()))
    cluster.stop()
  }
}
