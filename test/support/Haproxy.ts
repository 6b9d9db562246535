import { join } from "node:path"
import { requireDebianPackages } from "./DebianPackages.js"
import { freePort } from "./ServerProcess.js"
import { waitFor } from "./WaitFor.js"

const root = new URL("../..", import.meta.url).pathname

/** The documented example configuration, which the tests run as it is. */
export const haproxyConfig = join(root, "deploy/haproxy/haproxy.cfg")

/** What HAProxy's statistics say of a server of the backend, or of the backend (`BACKEND`). */
export interface ServerStats {
  /** `UP`, `DOWN`, `UP 1/2`, … */
  readonly status: string
  /** Requests it sent again after a failed connection or an empty answer (`retry-on`). */
  readonly retries: number
  /** Requests it sent to another server than the first (`option redispatch`). */
  readonly redispatches: number
}

/**
 * HAProxy from Debian's package, in the foreground with the example configuration, balancing over
 * `backends` (`host:port`, the configuration's `PETSTORE_1` and `PETSTORE_2`) from a free loopback
 * port; `stop` ends it.
 */
export const startHaproxy = async (backends: readonly [string, string]) => {
  requireDebianPackages(["/usr/sbin/haproxy"], ["haproxy"])
  const port = freePort()
  const statsPort = freePort()
  const proc = Bun.spawn(["/usr/sbin/haproxy", "-f", haproxyConfig, "-db"], {
    env: {
      ...process.env,
      PETSTORE_LISTEN: `127.0.0.1:${port}`,
      PETSTORE_1: backends[0],
      PETSTORE_2: backends[1],
      HAPROXY_STATS: `127.0.0.1:${statsPort}`
    },
    stdout: "pipe",
    stderr: "pipe"
  })
  const stats = async (): Promise<Record<string, ServerStats>> => {
    const csv = await fetch(`http://127.0.0.1:${statsPort}/stats;csv`).then((r) => r.text())
    const [header = "", ...rows] = csv.replace(/^# /, "").trim().split("\n")
    const columns = header.split(",")
    const at = (cells: Array<string>, name: string) => cells[columns.indexOf(name)] ?? ""
    return Object.fromEntries(
      rows.map((row) => row.split(",")).filter((cells) =>
        at(cells, "pxname") === "petstore" && at(cells, "svname") !== "FRONTEND"
      )
        .map((cells) => [at(cells, "svname"), {
          status: at(cells, "status"),
          retries: Number(at(cells, "wretr")),
          redispatches: Number(at(cells, "wredis"))
        }])
    )
  }
  /** Each server's status. */
  const states = async () =>
    Object.fromEntries(
      Object.entries(await stats()).filter(([name]) => name !== "BACKEND").map(([name, { status }]) => [name, status])
    )
  await waitFor(async () => {
    if (proc.exitCode !== null) throw new Error("HAProxy exited")
    return states().then(() => true, () => false)
  }, { what: "HAProxy's statistics answering", timeout: 5_000 }).catch(async (error: Error) => {
    proc.kill("SIGKILL")
    throw new Error(`HAProxy did not start (${error.message}): ${await new Response(proc.stderr).text()}`)
  })
  /** Each server's status sampled until `stop`: every status each one was seen in. */
  const watch = () => {
    const seen: Record<string, Set<string>> = {}
    let watching = true
    const sampling = (async () => {
      while (watching) {
        for (const [server, state] of Object.entries(await states().catch(() => ({})))) {
          ;(seen[server] ??= new Set()).add(state)
        }
        // Fixed: the balancer's view is sampled all along, not awaited.
        await Bun.sleep(100)
      }
    })()
    return {
      seen,
      stop: async () => {
        watching = false
        await sampling
      }
    }
  }
  return {
    url: `http://127.0.0.1:${port}`,
    stats,
    states,
    watch,
    stop: async () => {
      proc.kill("SIGTERM")
      await proc.exited
    }
  }
}
