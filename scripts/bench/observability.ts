/**
 * What metrics and traces cost, on get by id, the list of 20 and create: metrics on, and off again (`plain2`,
 * the noise), against off; tracing at 1%, every trace and ratio 0 (configured, nothing sampled) against off
 * (metrics off), exported to a receiving end in this process that counts and drops; every trace with the collector away against it taking them.
 */
import { copyFileSync } from "node:fs"
import { join } from "node:path"
import { folder, option, seedSqlite, workloads } from "./setup.js"
import { compare, printComparison } from "./wrk.js"

const variants = (sink: string) => {
  const traced = { METRICS_PORT: "off", OTEL_EXPORTER_OTLP_ENDPOINT: sink, OTEL_TRACES_SAMPLER: "always_on" }
  return [
    ...["plain", "plain2"].map((name) => ({ name, env: { METRICS_PORT: "off" } })),
    { name: "metrics", env: {} },
    {
      name: "sampled",
      env: { ...traced, OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.01" }
    },
    { name: "traced", env: traced },
    {
      name: "ratio0",
      env: { ...traced, OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0" }
    },
    // Nothing listens on this port: a collector that is down.
    { name: "away", env: { ...traced, OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:3939" } }
  ]
}
const pairs: Array<[string, string]> = [
  ["plain2", "plain"],
  ["metrics", "plain"],
  ["sampled", "plain"],
  ["traced", "plain"],
  ["ratio0", "plain"],
  ["away", "traced"]
]
const measured = ["get by id", "list, limit 20", "create"]

export const measureObservability = async () => {
  const sink = { exports: 0, bytes: 0 }
  const take = async (request: Request) => {
    sink.bytes += (await request.arrayBuffer()).byteLength
    sink.exports++
    return Response.json({})
  }
  const receiver = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: take })
  const chosen = option("variants")?.split(",")
  const configured = variants(`http://127.0.0.1:${receiver.port}`).filter(({ name }) => chosen?.includes(name) ?? true)
  const key = seedSqlite(join(folder, "seed.db"))
  for (const { name } of configured) copyFileSync(join(folder, "seed.db"), join(folder, `${name}.db`))
  const specs = configured.map(({ env, name }) => ({ name, env: { DATABASE_URL: join(folder, `${name}.db`), ...env } }))
  const rows = await compare(
    "SQLite",
    key,
    specs,
    pairs,
    workloads(key, "sqlite").filter(({ name }) => measured.includes(name))
  )
  await receiver.stop(true)
  printComparison(rows)
  console.log(`\nthe OTLP receiving end took ${sink.exports} exports, ${(sink.bytes / 1e6).toFixed(1)} MB`)
  return { variants: configured, rows, sink }
}
