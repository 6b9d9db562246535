/**
 * Instructions per request on the request path, counted by the CPU (`perf stat`, Debian's
 * `linux-perf`): `scripts/bench/request-path.ts` run for one round and for 21 on each
 * source folder, the difference divided by the 20,000 requests between them, so start-up and
 * warm-up fall out. Unlike time, the count barely moves with the machine's load (under 1% from
 * run to run), so a change of a few microseconds shows. Compilation runs on the main thread
 * (`BUN_JSC_useConcurrentJIT=0`) so that its share does not vary either. One folder at a time;
 * never two of these at once.
 *
 *   bun scripts/bench/instructions.ts --only=pets/7 /tmp/a/src src
 *
 * Any other option is passed on (`--metrics`, `--in-memory`, `--only=<workload>`).
 */
import { join } from "node:path"

const args = process.argv.slice(2)
const options = args.filter((arg) => arg.startsWith("--"))
const folders = args.filter((arg) => !arg.startsWith("--"))
const script = join(import.meta.dirname, "request-path.ts")
const requestsBetween = 20 * 1000

const instructions = (folder: string, rounds: number): number => {
  const result = Bun.spawnSync(
    ["perf", "stat", "-x,", "-e", "instructions:u", process.execPath, script, `--rounds=${rounds}`, ...options, folder],
    { env: { ...process.env, BUN_JSC_useConcurrentJIT: "0" }, stdout: "ignore", stderr: "pipe" }
  )
  const line = result.stderr.toString().split("\n").find((line) => line.includes("instructions"))
  const count = Number(line?.split(",")[0])
  if (!result.success || !Number.isFinite(count)) throw new Error(`perf stat failed: ${result.stderr.toString()}`)
  return count
}

for (const folder of folders) {
  const perRequest = (instructions(folder, 21) - instructions(folder, 1)) / requestsBetween
  console.log(`${folder}\t${options.join(" ")}\t${Math.round(perRequest)} instructions/request`)
}
