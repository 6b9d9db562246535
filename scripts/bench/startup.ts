/**
 * Start to first answer: dist/petstore (and `bun dist/main.js` beside it) from the spawn to the first
 * 200 on `GET /v1/pets?limit=1` with a key, on a database made beforehand; the median and slowest.
 */
import { existsSync } from "node:fs"
import { join } from "node:path"
import { freePort } from "../../test/support/ServerProcess.js"
import { allCores, folder, root, rounds, run, startServer } from "./setup.js"
import { median } from "./wrk.js"

export const measureStartup = async () => {
  const executable = join(root, "dist/petstore")
  if (!existsSync(executable)) throw new Error("dist/petstore is missing: run `npm run build` first")
  // The database, migrated and holding a key, made by the executable beforehand.
  const env = { DATABASE_URL: join(folder, "petstore.db"), PETSTORE_ENV: "production" }
  const key = run([executable, "keys", "create", "--name", "startup"], folder, env).split("\n").at(-1)!
  const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`
  console.log(`start to first answer (spawn to GET /v1/pets?limit=1 with a key answered 200), ${rounds} starts each:`)
  const results: Record<string, Array<number>> = {}
  const commands: Array<[string, Array<string>]> = [["dist/petstore", [executable]], ["bun dist/main.js", [
    process.execPath,
    join(root, "dist/main.js")
  ]]]
  for (const [name, command] of commands) {
    const times: Array<number> = []
    for (let round = 0; round < rounds; round++) {
      const startedAt = performance.now()
      // Not pinned: a start may use every core, as it would in service.
      const server = await startServer("startup", freePort(), key, { ...env, METRICS_PORT: String(freePort()) }, {
        command,
        cores: allCores,
        cwd: folder
      })
      times.push(performance.now() - startedAt)
      if ((await server.stop()) !== 0) throw new Error(`${name} did not stop with exit code 0`)
    }
    console.log(`  ${name.padEnd(17)} median ${seconds(median(times))}, slowest ${seconds(Math.max(...times))}`)
    results[name] = times
  }
  return results
}
