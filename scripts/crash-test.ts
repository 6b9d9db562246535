/**
 * Crash durability: concurrent creates against the real server, SIGKILL in the middle, a restart on
 * the same database, then every pet whose 201 reached the client must be there with identical
 * fields, and no id may appear twice. Prints the counts; exits 1 on any loss or duplicate.
 *
 * Usage: bun scripts/crash-test.ts [--writers N] [--kill-after-ms MS]
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { runCommand, startServer } from "../test/support/ServerProcess.js"
import { numberOption } from "./options.js"

const writers = numberOption("--writers", 16)
const killAfterMs = numberOption("--kill-after-ms", 1500)

const folder = mkdtempSync(join(tmpdir(), "petstore-crash-"))
try {
  const env = {
    DATABASE_URL: join(folder, "petstore.db"),
    RATE_LIMIT_PER_SECOND: "1000000",
    RATE_LIMIT_BURST: "1000000"
  }
  const key = (await runCommand(["src/bin/keys.ts", "create", "--name", "crash"], env)).stdout.trim().split("\n").at(
    -1
  )!
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
  const server = await startServer(env)

  const acknowledged: Array<{ id: number; name: string; categoryId: number; status?: string }> = []
  let failed = 0
  let killed = false
  const writer = async (w: number) => {
    for (let i = 0; !killed; i++) {
      const pet = {
        name: `writer ${w} pet ${i} ✓`,
        categoryId: w * 1_000_000 + i,
        ...(i % 2 === 0 ? { status: "sold" } : {})
      }
      try {
        const response = await fetch(`${server.url}/v1/pets`, { method: "POST", headers, body: JSON.stringify(pet) })
        if (response.status !== 201) throw new Error(`status ${response.status}`)
        acknowledged.push(await response.json())
      } catch {
        failed++
      }
    }
  }
  const running = Promise.all(Array.from({ length: writers }, (_, w) => writer(w)))
  await Bun.sleep(killAfterMs)
  server.proc.kill("SIGKILL")
  killed = true
  await server.proc.exited
  await running

  const again = await startServer(env)
  const stored = new Map<number, unknown>()
  let duplicates = 0
  try {
    let url: string | undefined = `${again.url}/v1/pets?limit=100`
    while (url !== undefined) {
      const response: Response = await fetch(url, { headers })
      for (const pet of (await response.json()) as Array<{ id: number }>) {
        if (stored.has(pet.id)) duplicates++
        stored.set(pet.id, pet)
      }
      url = /<([^>]+)>; rel="next"/.exec(response.headers.get("link") ?? "")?.[1]
    }
  } finally {
    await again.stop()
  }
  const lost = acknowledged.filter((pet) => JSON.stringify(stored.get(pet.id)) !== JSON.stringify(pet))
  console.log(
    `acknowledged ${acknowledged.length}, failed or cut off ${failed}, stored after restart ${stored.size}, ` +
      `lost or changed ${lost.length}, duplicate ids ${duplicates}`
  )
  if (lost.length > 0 || duplicates > 0 || acknowledged.length === 0) process.exit(1)
} finally {
  rmSync(folder, { recursive: true, force: true })
}
