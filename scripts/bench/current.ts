/**
 * The default mode, the current build (dist/main.js) on every workload: one process on SQLite, the
 * same with WORKERS=2, then PostgreSQL with one instance and with two on the same database.
 */
import { copyFileSync } from "node:fs"
import { join } from "node:path"
import { startPostgresCluster } from "../../test/support/PostgresCluster.js"
import {
  allCores,
  folder,
  loadCore,
  only,
  seedPostgres,
  seedSqlite,
  serverCore,
  startServer,
  workloads
} from "./setup.js"
import { fixed, perWorkload, printTable } from "./wrk.js"

const settings = `wrk 1 thread, 32 connections, medians of the rounds after a dropped one`

const onSqlite = async () => {
  const key = seedSqlite(join(folder, "seed.db"))
  for (const copy of ["one.db", "workers.db"]) copyFileSync(join(folder, "seed.db"), join(folder, copy))
  const service = await startServer("sqlite", 3901, key, { DATABASE_URL: join(folder, "one.db") })
  const one = await perWorkload(workloads(key, "sqlite"), [service])
  await service.stop()
  // The supervisor, both workers and wrk on every core: there is no core to spare.
  const workers = await startServer("workers", 3902, key, { DATABASE_URL: join(folder, "workers.db"), WORKERS: "2" }, {
    cores: allCores
  })
  const two = await perWorkload(workloads(key, "sqlite"), [workers], allCores)
  await workers.stop()
  printTable(
    `SQLite, one process on core ${serverCore}, wrk on core ${loadCore}; WORKERS=2 and wrk on every core (${settings})`,
    ["workload", "rps", "p50 ms", "p99 ms", "µs/request", "2 workers rps", "×", "p99 ms", "µs/request"],
    one.map((row, i) => [
      row.workload,
      fixed(row.rps, 0),
      fixed(row.p50, 2),
      fixed(row.p99, 2),
      fixed(row.cpuUs, 1),
      fixed(two[i]!.rps, 0),
      fixed(two[i]!.rps / row.rps, 2),
      fixed(two[i]!.p99, 2),
      fixed(two[i]!.cpuUs, 1)
    ])
  )
  return { sqlite: one, twoWorkers: two }
}

/** `sqliteRps`: SQLite's requests per second in the same run, by workload, for the ratio. */
const onPostgres = async (sqliteRps: (workload: string) => number) => {
  // Started after the benchmark moved onto the load's core, the cluster's processes are there too.
  const cluster = startPostgresCluster(3910)
  try {
    const { key, url } = seedPostgres(cluster.url, "petstore_bench")
    const first = await startServer("postgres-1", 3911, key, { DATABASE_URL: url })
    const one = await perWorkload(workloads(key, "postgres"), [first])
    // A second instance on the same database and core: the same 32 connections split over both.
    const second = await startServer("postgres-2", 3912, key, { DATABASE_URL: url })
    const two = await perWorkload(workloads(key, "postgres"), [first, second])
    await Promise.all([first.stop(), second.stop()])
    printTable(
      `PostgreSQL (its cluster on core ${loadCore} with wrk, the service on core ${serverCore}); two instances on the same core (${settings})`,
      ["workload", "rps", "of SQLite", "µs/request", "p99 ms", "2 instances rps", "µs/request", "µs ×"],
      one.map((row, i) => [
        row.workload,
        fixed(row.rps, 0),
        fixed(row.rps / sqliteRps(row.workload), 2),
        fixed(row.cpuUs, 1),
        fixed(row.p99, 2),
        fixed(two[i]!.rps, 0),
        fixed(two[i]!.cpuUs, 1),
        fixed(two[i]!.cpuUs / row.cpuUs, 2)
      ])
    )
    return { postgres: one, twoInstances: two }
  } finally {
    cluster.stop()
  }
}

export const measureCurrent = async () => {
  const sqlite = only === "postgres" ? undefined : await onSqlite()
  const sqliteRps = (workload: string) => sqlite?.sqlite.find((row) => row.workload === workload)?.rps ?? NaN
  return { ...sqlite, ...(only === "sqlite" ? {} : await onPostgres(sqliteRps)) }
}
