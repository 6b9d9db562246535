/**
 * Failed authentications from a million distinct client addresses, over HTTP: the server's resident
 * memory before and after. The production build runs on a temporary SQLite database behind a
 * "proxy" (TRUSTED_PROXIES=127.0.0.1), and wrk sends each request with a wrong key and an
 * X-Forwarded-For of its own /64, so every request makes the limiter a new bucket.
 *
 * Usage: bun run build && bun scripts/address-flood.ts [--requests N]
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { numberOption } from "./options.js"

const root = new URL("..", import.meta.url).pathname
const requests = numberOption("--requests", 1_000_000)
const port = 3921
const folder = mkdtempSync(join(tmpdir(), "petstore-flood-"))
process.on("exit", () => rmSync(folder, { recursive: true, force: true }))

const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024

const server = Bun.spawn(["bun", "dist/main.js"], {
  cwd: root,
  env: {
    ...process.env,
    HOST: "127.0.0.1",
    PORT: String(port),
    DATABASE_URL: join(folder, "flood.db"),
    TRUSTED_PROXIES: "127.0.0.1",
    LOG_LEVEL: "warn",
    METRICS_PORT: "off"
  },
  stdout: "inherit",
  stderr: "inherit"
})
process.on("exit", () => server.kill("SIGKILL"))
const url = `http://127.0.0.1:${port}/v1/pets`
while (!(await fetch(`http://127.0.0.1:${port}/livez`).then((r) => r.ok, () => false))) {
  if (server.exitCode !== null) throw new Error("the server did not start")
  await Bun.sleep(20)
}

/** A wrk script: a wrong key from a new /64 on every request, numbered from `offset`. */
const script = (offset: number) => {
  const path = join(folder, `flood-${offset}.lua`)
  writeFileSync(
    path,
    `local sent = ${offset}
wrk.headers["Authorization"] = "Bearer ps_test_wrong"
request = function()
  sent = sent + 1
  wrk.headers["X-Forwarded-For"] = string.format("2001:db8:%x:%x::1", math.floor(sent / 65536), sent % 65536)
  return wrk.format("GET", "/v1/pets")
end
`
  )
  return path
}
/** Runs of 10 s until `count` requests are answered, each run's addresses after the last's. */
const flood = (count: number, offset: number) => {
  let sent = 0
  while (sent < count) {
    const run = Bun.spawnSync(["wrk", "-t1", "-c32", "-d10s", "-s", script(offset + sent), url])
    sent += Number(/(\d+) requests in/.exec(run.stdout.toString())?.[1])
  }
  return sent
}

// Warm up with other addresses first, so "before" is a server that has run this path.
flood(20_000, 1 << 30)
await Bun.sleep(2000)
const before = rssMiB(server.pid)
const started = performance.now()
const sent = flood(requests, 0)
const seconds = (performance.now() - started) / 1000
await Bun.sleep(2000)
const after = rssMiB(server.pid)
server.kill("SIGTERM")
await server.exited
console.log(
  `${sent} failed requests from distinct /64s in ${seconds.toFixed(0)} s: resident memory ${before.toFixed(1)} MiB before, ` +
    `${after.toFixed(1)} MiB after (${after >= before ? "+" : ""}${(after - before).toFixed(1)} MiB)`
)
