import { spawn, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { requireDebianPackages } from "./DebianPackages.js"
import { freePort } from "./ServerProcess.js"
import { waitFor } from "./WaitFor.js"

/** Debian's `prometheus` package, installed by the set-up step: the server and `promtool`. */
const ensureInstalled = () => requireDebianPackages(["/usr/bin/promtool", "/usr/bin/prometheus"], ["prometheus"])

/** `promtool check metrics` on an exposition: its exit code and what it printed. */
export const promtoolCheckMetrics = (exposition: string) => {
  ensureInstalled()
  const result = spawnSync("promtool", ["check", "metrics"], { input: exposition, encoding: "utf8" })
  return { exitCode: result.status, output: result.stdout + result.stderr }
}

/** `promtool check rules` on a rules file holding `rules`: its exit code and what it printed. */
export const promtoolCheckRules = (rules: string) => {
  ensureInstalled()
  const folder = mkdtempSync(join(tmpdir(), "petstore-rules-"))
  try {
    const file = join(folder, "rules.yml")
    writeFileSync(file, rules)
    const result = spawnSync("promtool", ["check", "rules", file], { encoding: "utf8" })
    return { exitCode: result.status, output: result.stdout + result.stderr }
  } finally {
    rmSync(folder, { recursive: true, force: true })
  }
}

/** `promtool test rules` on a unit-test file (its `rule_files` found beside it): its exit code and what it printed. */
export const promtoolTestRules = (testFile: string) => {
  ensureInstalled()
  const result = spawnSync("promtool", ["test", "rules", testFile], { encoding: "utf8" })
  return { exitCode: result.status, output: result.stdout + result.stderr }
}

/**
 * A Prometheus server in a temporary folder on a free loopback port, scraping `target`
 * (`host:port`) every second; `stop` ends it and removes the folder.
 */
export const startPrometheus = async (target: string) => {
  ensureInstalled()
  const folder = mkdtempSync(join(tmpdir(), "petstore-prometheus-"))
  const port = freePort()
  writeFileSync(
    join(folder, "prometheus.yml"),
    `global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n` +
      `  - job_name: petstore\n    static_configs:\n      - targets: ["${target}"]\n`
  )
  const proc = spawn("prometheus", [
    `--config.file=${join(folder, "prometheus.yml")}`,
    `--storage.tsdb.path=${join(folder, "data")}`,
    `--web.listen-address=127.0.0.1:${port}`
  ], { stdio: "ignore" })
  const url = `http://127.0.0.1:${port}`
  const stop = async () => {
    proc.kill("SIGTERM")
    await new Promise((resolve) => proc.exitCode !== null ? resolve(undefined) : proc.once("exit", resolve))
    rmSync(folder, { recursive: true, force: true })
  }
  await waitFor(async () => {
    if (proc.exitCode !== null) throw new Error("Prometheus exited at its start")
    return fetch(`${url}/-/ready`).then((r) => r.ok, () => false)
  }, { what: "Prometheus did not start", timeout: 20_000, interval: 50 }).catch(async (error) => {
    await stop()
    throw error
  })
  /** An instant query's result: each series' labels and value. */
  const query = async (promql: string): Promise<Array<{ metric: Record<string, string>; value: number }>> => {
    const response = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(promql)}`)
    const body = await response.json() as {
      data: { result: Array<{ metric: Record<string, string>; value: [number, string] }> }
    }
    return body.data.result.map(({ metric, value }) => ({ metric, value: Number(value[1]) }))
  }
  return { url, query, stop }
}
