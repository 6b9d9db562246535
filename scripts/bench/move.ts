/**
 * The move's figures: a store of `--pets` pets (1,000,000 by default) copied and verified SQLite →
 * PostgreSQL and back, each with its time and the process's peak memory; then the write outage of
 * the runbook on that store (read-only on, copy, the new instance serving creates), with a create
 * every 20 ms against the old instance and then the new one.
 *
 * Usage: sh scripts/with-bun.sh bun scripts/bench/move.ts [--pets N]
 */
import { Database } from "bun:sqlite"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import Pg from "pg"
import { startPostgresCluster } from "../../test/support/PostgresCluster.js"
import { freePort, startServer } from "../../test/support/ServerProcess.js"

const root = new URL("../..", import.meta.url).pathname
const argument = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name)
  return i < 0 ? fallback : Number(process.argv[i + 1])
}
const pets = argument("--pets", 1_000_000)
const folder = mkdtempSync(join(tmpdir(), "petstore-move-bench-"))
const cluster = startPostgresCluster(freePort())

const admin = async (statement: string) => {
  const client = new Pg.Client({ connectionString: cluster.url })
  await client.connect()
  await client.query(statement)
  await client.end()
}
const database = async (name: string) => {
  await admin(`CREATE DATABASE ${name}`)
  const url = new URL(cluster.url)
  url.pathname = `/${name}`
  return url.href
}

/** Runs the db command; its output, wall time and the process's peak resident memory. */
const dbCommand = async (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const startedAt = performance.now()
  const proc = Bun.spawn(["bun", "src/bin/db.ts", ...args], { cwd: root, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" })
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  const seconds = (performance.now() - startedAt) / 1000
  if (exitCode !== 0) throw new Error(`db ${args[0]} failed: ${stderr}`)
  // Bun reports the peak in bytes.
  return { stdout, seconds, maxRssMiB: (proc.resourceUsage()?.maxRSS ?? 0) / 1024 / 1024 }
}

try {
  const source = join(folder, "petstore.db")
  const key = Bun.spawnSync(["bun", "src/bin/keys.ts", "create", "--name", "bench"], { cwd: root, env: { ...process.env, DATABASE_URL: source } })
    .stdout.toString().trim().split("\n").at(-1)!
  const sqlite = new Database(source)
  sqlite.run(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${pets}) ` +
      "INSERT INTO pets (name, category_id, status) SELECT 'pet ' || i, i % 1000, " +
      "CASE i % 4 WHEN 0 THEN NULL WHEN 1 THEN 'available' WHEN 2 THEN 'pending' ELSE 'sold' END FROM n"
  )
  sqlite.close()

  const summary = (stdout: string) => stdout.trim().split("\n").at(-1)!
  const there = await database("move_there")
  const toPostgres = await dbCommand(["copy", "--from", source, "--to-env", "TARGET_URL"], { TARGET_URL: there })
  const back = join(folder, "back.db")
  const toSqlite = await dbCommand(["copy", "--from-env", "SOURCE_URL", "--to", back], { SOURCE_URL: there })
  const verify = await dbCommand(["verify", "--from", source, "--to", back])

  // The runbook's write outage on the same store, with a create every 20 ms.
  const runbookTarget = await database("move_runbook")
  const unlimited = { RATE_LIMIT_PER_SECOND: "100000", RATE_LIMIT_BURST: "100000" }
  const old = await startServer({ DATABASE_URL: source, ...unlimited })
  const current = { url: old.url }
  let running = true
  let firstRefused = 0
  let resumed = 0
  const writer = (async () => {
    while (running) {
      const response = await fetch(`${current.url}/v1/pets`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
        body: JSON.stringify({ name: "live", categoryId: 1 })
      }).catch(() => undefined)
      if (response?.status === 503 && firstRefused === 0) firstRefused = performance.now()
      if (response?.status === 201 && firstRefused > 0 && resumed === 0) resumed = performance.now()
      await response?.arrayBuffer()
      await Bun.sleep(20)
    }
  })()
  await dbCommand(["read-only", "on"], { DATABASE_URL: source })
  const runbookCopy = await dbCommand(["copy", "--from", source, "--to-env", "TARGET_URL"], { TARGET_URL: runbookTarget })
  const fresh = await startServer({ DATABASE_URL: runbookTarget, ...unlimited })
  current.url = fresh.url
  while (resumed === 0) await Bun.sleep(20)
  running = false
  await writer
  await Promise.all([old.stop(), fresh.stop()])

  console.log(`move of ${pets.toLocaleString("en")} pets (load average ${(await Bun.file("/proc/loadavg").text()).split(" ")[0]})`)
  console.log(`SQLite → PostgreSQL  ${toPostgres.seconds.toFixed(1)} s wall, peak ${toPostgres.maxRssMiB.toFixed(0)} MiB: ${summary(toPostgres.stdout)}`)
  console.log(`PostgreSQL → SQLite  ${toSqlite.seconds.toFixed(1)} s wall, peak ${toSqlite.maxRssMiB.toFixed(0)} MiB: ${summary(toSqlite.stdout)}`)
  console.log(`verify round trip    ${verify.seconds.toFixed(1)} s wall, peak ${verify.maxRssMiB.toFixed(0)} MiB`)
  console.log(
    `runbook write outage ${((resumed - firstRefused) / 1000).toFixed(1)} s (copy ${runbookCopy.seconds.toFixed(1)} s of it); reads served throughout`
  )
} finally {
  cluster.stop()
  rmSync(folder, { recursive: true, force: true })
}
