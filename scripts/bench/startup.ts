/**
 * Start to first answer: the executable dist/petstore started in a folder of its own, timed from
 * the spawn to the first 200 on `GET /v1/pets?limit=1` with a key (its database made beforehand),
 * with the bundle `bun dist/main.js` beside it for comparison: the median and the slowest start.
 *
 * Usage: npm run bench -- --startup [--rounds N] (builds first; bun scripts/bench.ts --startup uses dist as it is)
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { numberOption } from "../options.js"
import { median } from "./wrk.js"

const root = join(import.meta.dir, "../..")
const executable = join(root, "dist/petstore")
if (!existsSync(executable)) {
  console.error("dist/petstore is missing: run `npm run build` first")
  process.exit(1)
}
const rounds = numberOption("--rounds", 10)
const folder = mkdtempSync(join(tmpdir(), "petstore-startup-"))
process.on("exit", () => rmSync(folder, { recursive: true, force: true }))
const databaseUrl = join(folder, "petstore.db")

const freePort = () => {
  const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() })
  const port = probe.port!
  probe.stop(true)
  return port
}

/** Milliseconds from the spawn of `command` in `cwd` to its first listed page, then it is stopped. */
const timeStart = async (command: Array<string>, cwd: string, key: string) => {
  const port = freePort()
  const startedAt = performance.now()
  const proc = Bun.spawn(command, {
    cwd,
    env: { ...process.env, DATABASE_URL: databaseUrl, HOST: "127.0.0.1", PORT: String(port), METRICS_PORT: String(freePort()), STOP_GRACE_SECONDS: "0" },
    stdout: "ignore",
    stderr: "inherit"
  })
  for (;;) {
    const ok = await fetch(`http://127.0.0.1:${port}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${key}` } })
      .then((response) => response.status === 200, () => false)
    if (ok) break
    if (proc.exitCode !== null) throw new Error(`${command.join(" ")} did not start`)
    await Bun.sleep(2)
  }
  const elapsed = performance.now() - startedAt
  proc.kill("SIGTERM")
  if ((await proc.exited) !== 0) throw new Error(`${command.join(" ")} did not stop with exit code 0`)
  return elapsed
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`

// The database, migrated and holding a key, made by the executable beforehand.
const created = Bun.spawnSync([executable, "keys", "create", "--name", "startup"], {
  cwd: folder,
  env: { ...process.env, DATABASE_URL: databaseUrl }
})
if (created.exitCode !== 0) throw new Error(`keys create failed: ${created.stderr}`)
const key = created.stdout.toString().trim().split("\n").at(-1)!

console.log(`start to first answer (spawn to GET /v1/pets?limit=1 with a key answered 200), ${rounds} starts each:`)
for (
  const [name, command] of [
    ["dist/petstore", [executable]],
    ["bun dist/main.js", [process.execPath, join(root, "dist/main.js")]]
  ] as const
) {
  const times: Array<number> = []
  for (let round = 0; round < rounds; round++) times.push(await timeStart([...command], folder, key))
  console.log(`  ${name.padEnd(17)} median ${seconds(median(times))}, slowest ${seconds(Math.max(...times))}`)
}
