/**
 * `--pets` pets (a million by default) copied and verified SQLite → PostgreSQL and back, each with
 * its time and peak memory; then the runbook's write outage on that store (read-only on, copy, a new
 * instance), a create every 20 ms against the old instance and then the new one.
 */
import { join } from "node:path"
import { startPostgresCluster } from "../../test/support/PostgresCluster.js"
import { freePort, startServer } from "../../test/support/ServerProcess.js"
import { createDatabase, folder, numberOption, root, seedSqlite } from "./setup.js"

/** Runs the db command; its output, wall time and the process's peak resident memory. */
const dbCommand = async (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const startedAt = performance.now()
  const proc = Bun.spawn(["bun", "src/bin/db.ts", ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdout: "pipe",
    stderr: "pipe"
  })
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited
  ])
  if (exitCode !== 0) throw new Error(`db ${args[0]} failed: ${stderr}`)
  // Bun reports the peak in bytes.
  return {
    stdout,
    seconds: (performance.now() - startedAt) / 1000,
    maxRssMiB: (proc.resourceUsage()?.maxRSS ?? 0) / 1024 / 1024
  }
}

export const measureMove = async () => {
  const pets = numberOption("pets", 1_000_000)
  const cluster = startPostgresCluster(freePort())
  try {
    const source = join(folder, "petstore.db")
    const key = seedSqlite(source, root, pets)

    const there = createDatabase(cluster.url, "move_there")
    const toPostgres = await dbCommand(["copy", "--from", source, "--to-env", "TARGET_URL"], { TARGET_URL: there })
    const back = join(folder, "back.db")
    const toSqlite = await dbCommand(["copy", "--from-env", "SOURCE_URL", "--to", back], { SOURCE_URL: there })
    const verify = await dbCommand(["verify", "--from", source, "--to", back])

    // The runbook's write outage on the same store, with a create every 20 ms.
    const runbookTarget = createDatabase(cluster.url, "move_runbook")
    const unlimited = { RATE_LIMIT_PER_SECOND: "100000", RATE_LIMIT_BURST: "100000" }
    const old = await startServer({ DATABASE_URL: source, ...unlimited })
    const current = { url: old.url }
    // Creates until one succeeds on the new instance: the time from the first refused to it.
    const outage = (async () => {
      let firstRefused = 0
      for (;;) {
        const response = await fetch(`${current.url}/v1/pets`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
          body: JSON.stringify({ name: "live", categoryId: 1 })
        }).catch(() => undefined)
        await response?.arrayBuffer()
        if (response?.status === 503 && firstRefused === 0) firstRefused = performance.now()
        if (response?.status === 201 && firstRefused > 0) return performance.now() - firstRefused
        await Bun.sleep(20)
      }
    })()
    await dbCommand(["read-only", "on"], { DATABASE_URL: source })
    const runbookCopy = await dbCommand(["copy", "--from", source, "--to-env", "TARGET_URL"], {
      TARGET_URL: runbookTarget
    })
    const fresh = await startServer({ DATABASE_URL: runbookTarget, ...unlimited })
    current.url = fresh.url
    const outageMs = await outage
    await Promise.all([old.stop(), fresh.stop()])

    const summary = (stdout: string) => stdout.trim().split("\n").at(-1)!
    console.log(
      `move of ${pets.toLocaleString("en")} pets (load average ${
        (await Bun.file("/proc/loadavg").text()).split(" ")[0]
      })`
    )
    console.log(
      `SQLite → PostgreSQL  ${toPostgres.seconds.toFixed(1)} s wall, peak ${toPostgres.maxRssMiB.toFixed(0)} MiB: ${
        summary(toPostgres.stdout)
      }`
    )
    console.log(
      `PostgreSQL → SQLite  ${toSqlite.seconds.toFixed(1)} s wall, peak ${toSqlite.maxRssMiB.toFixed(0)} MiB: ${
        summary(toSqlite.stdout)
      }`
    )
    console.log(`verify round trip    ${verify.seconds.toFixed(1)} s wall, peak ${verify.maxRssMiB.toFixed(0)} MiB`)
    console.log(
      `runbook write outage ${(outageMs / 1000).toFixed(1)} s (copy ${
        runbookCopy.seconds.toFixed(1)
      } s of it); reads served throughout`
    )
    return { pets, toPostgres, toSqlite, verify, runbookCopy, outageSeconds: outageMs / 1000 }
  } finally {
    cluster.stop()
  }
}
