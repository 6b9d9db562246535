/**
 * Failed authentications from a million client addresses: the server's resident memory before and
 * after. Behind a trusted "proxy", each request has a wrong key and an X-Forwarded-For of its own
 * /64, so every request makes the limiter a new bucket.
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { createKey, folder, numberOption, rssMiB, startServer } from "./setup.js"
import { load } from "./wrk.js"

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

export const measureFlood = async () => {
  const requests = numberOption("requests", 1_000_000)
  const databaseUrl = join(folder, "flood.db")
  // The limit on failures at its default (20 a minute), as a client flooding the service meets it.
  const env = {
    DATABASE_URL: databaseUrl,
    TRUSTED_PROXIES: "127.0.0.1",
    AUTH_FAILURES_PER_MINUTE: "20",
    LOG_LEVEL: "warn",
    METRICS_PORT: "off"
  }
  const server = await startServer("flood", 3903, createKey(databaseUrl), env)
  /** Runs until `count` requests are answered, each run's addresses after the last's. */
  const flood = async (count: number, offset: number) => {
    let sent = 0
    while (sent < count) {
      sent += (await load([{ url: `${server.url}/v1/pets`, script: script(offset + sent), pids: [] }]))[0]!.requests
    }
    return sent
  }
  // Warm up with other addresses first, so "before" is a server that has run this path.
  await flood(20_000, 1 << 30)
  await Bun.sleep(2000)
  const before = rssMiB(server.pid)
  const started = performance.now()
  const sent = await flood(requests, 0)
  const seconds = (performance.now() - started) / 1000
  await Bun.sleep(2000)
  const after = rssMiB(server.pid)
  await server.stop()
  console.log(
    `${sent} failed requests from distinct /64s in ${seconds.toFixed(0)} s: resident memory ${
      before.toFixed(1)
    } MiB before, ` +
      `${after.toFixed(1)} MiB after (${after >= before ? "+" : ""}${(after - before).toFixed(1)} MiB)`
  )
  return { sent, seconds, beforeMiB: before, afterMiB: after }
}
