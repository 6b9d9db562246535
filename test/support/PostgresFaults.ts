import { spawnSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { type PostgresCluster, startPostgresCluster } from "./PostgresCluster.js"
import { freePort } from "./ServerProcess.js"

/**
 * A PostgreSQL cluster of the test's own, for faults that would disturb other tests on the shared
 * one: stopped with SIGSTOP (the postmaster and every backend, as a frozen host looks) and resumed.
 */
export const faultyPostgres = (maxConnections?: number): PostgresCluster & {
  readonly freeze: () => void
  readonly thaw: () => void
  /** `pg_ctl restart -m fast`: every session ended, the server back a moment later. */
  readonly restart: () => void
  readonly [Symbol.dispose]: () => void
} => {
  const cluster = startPostgresCluster(freePort(), maxConnections)
  const postmaster = () => Number(readFileSync(join(cluster.dataDirectory, "postmaster.pid"), "utf8").split("\n")[0])
  let frozen: Array<number> = []
  const thaw = () => {
    for (const pid of frozen) process.kill(pid, "SIGCONT")
    frozen = []
  }
  return {
    ...cluster,
    freeze: () => {
      const pid = postmaster()
      const backends = spawnSync("pgrep", ["-P", String(pid)], { encoding: "utf8" }).stdout
      frozen = [pid, ...backends.split("\n").filter((line) => line !== "").map(Number)]
      for (const pid of frozen) process.kill(pid, "SIGSTOP")
    },
    thaw,
    restart: cluster.restart,
    [Symbol.dispose]: () => {
      thaw()
      cluster.stop()
    }
  }
}
