/**
 * The benchmark, one entry point whose options choose the mode (docs/benchmarks.md lists them all,
 * with the figures): by default the current build on every workload, on SQLite (one process, then
 * WORKERS=2) and PostgreSQL (one instance, then two), then what observability costs, or one of those
 * with `--only`; `--ab A B` two commits built and compared; `--move` a million pets moved both ways;
 * `--startup` start to first answer of dist/petstore; `--address-flood` memory under failures from a
 * million addresses; `--bounds` the latency and memory bounds, exiting 1 when one is exceeded.
 * `npm run bench -- …` builds dist/ first; `bench-move`, `address-flood` are aliases.
 */
import { measureAb } from "./bench/ab.js"
import { checkBounds } from "./bench/bounds.js"
import { measureCurrent } from "./bench/current.js"
import { measureFlood } from "./bench/flood.js"
import { measureMove } from "./bench/move.js"
import { measureObservability } from "./bench/observability.js"
import { abRefs, has, only, pinToLoadCore, writeResults } from "./bench/setup.js"
import { measureStartup } from "./bench/startup.js"

if (has("move")) {
  writeResults("move", await measureMove())
} else if (has("startup")) {
  writeResults("startup", await measureStartup())
} else if (has("bounds")) {
  const { bounds, exceeded } = await checkBounds()
  writeResults("bounds", bounds)
  if (exceeded.length > 0) process.exit(1)
} else if (Bun.spawnSync(["sh", "-c", "command -v wrk"]).exitCode !== 0) {
  console.error("wrk is missing. Install it with: sudo apt-get install wrk")
  process.exit(1)
} else if (abRefs !== undefined) {
  writeResults("ab", await measureAb(abRefs))
} else {
  pinToLoadCore()
  if (has("address-flood")) {
    writeResults("address-flood", await measureFlood())
  } else {
    const current = only === "observability" ? {} : await measureCurrent()
    const observability = only === undefined || only === "observability" ? await measureObservability() : undefined
    writeResults("current", { ...current, observability })
  }
}
process.exit(0)
