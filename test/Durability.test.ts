import { describe, expect, it } from "@effect/vitest"
import { join } from "node:path"
import { runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"

describe("durability and concurrency on the real server with SQLite", () => {
  it("loses no acknowledged create when the process is killed mid-load (scripts/crash-test.ts)", async () => {
    const result = await runCommand(["scripts/crash-test.ts", "--writers", "8", "--kill-after-ms", "1000"], {})
    expect(result.exitCode, result.stdout + result.stderr).toBe(0)
    expect(result.stdout).toMatch(/lost or changed 0, duplicate ids 0/)
    expect(Number(/acknowledged (\d+)/.exec(result.stdout)?.[1])).toBeGreaterThan(0)
  })

  it(
    "64 connections of mixed reads and writes: no error, no 5xx, memory steady (scripts/load-test.ts, short)",
    async () => {
      const result = await runCommand(["scripts/load-test.ts", "--duration", "12", "--connections", "64"], {})
      expect(result.exitCode, result.stdout + result.stderr).toBe(0)
      const figures = JSON.parse(result.stdout.trim().split("\n").at(-1)!)
      expect(figures).toMatchObject({ errors: 0, serverErrors: 0, serverExitCode: 0 })
      expect(figures.requests).toBeGreaterThan(1000)
      expect(figures.rssGrowth).toBeLessThan(1.2)
    },
    60_000
  )

  it(
    "SIGTERM during that load: every request sent before it or in its grace gets its full answer, later ones are refused",
    async () => {
      const result = await runCommand([
        "scripts/load-test.ts",
        "--duration",
        "8",
        "--sigterm-after",
        "3",
        "--grace",
        "2"
      ], {})
      expect(result.exitCode, result.stdout + result.stderr).toBe(0)
      const figures = JSON.parse(result.stdout.trim().split("\n").at(-1)!)
      expect(figures).toMatchObject({ errors: 0, serverErrors: 0, otherAfterSignal: 0, serverExitCode: 0 })
      // Refused (or answered, at the grace's very end), never a 5xx but shutting_down.
      expect(figures.sentAfterSignal).toBeGreaterThan(0)
    },
    60_000
  )

  it("500 concurrent creates get 500 distinct ids; readers paging meanwhile see no pet twice and skip none", async () => {
    using folder = temporaryFolder()
    const env = { DATABASE_URL: join(folder.path, "petstore.db"), RATE_LIMIT_BURST: "100000" }
    const key = (await runCommand(["src/bin/keys.ts", "create", "--name", "load"], env)).stdout.trim().split("\n").at(
      -1
    )!
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
    const server = await startServer(env)
    try {
      const create = (i: number) =>
        fetch(`${server.url}/v1/pets`, {
          method: "POST",
          headers,
          body: JSON.stringify({ name: `p${i}`, categoryId: i })
        })
          .then((r) => r.json() as Promise<{ id: number }>)
      const existing = await Promise.all(Array.from({ length: 50 }, (_, i) => create(i)))
      const walk = async () => {
        const seen: Array<number> = []
        let url: string | undefined = `${server.url}/v1/pets?limit=7`
        while (url !== undefined) {
          const response: Response = await fetch(url, { headers })
          seen.push(...((await response.json()) as Array<{ id: number }>).map((pet) => pet.id))
          url = /<([^>]+)>; rel="next"/.exec(response.headers.get("link") ?? "")?.[1]
        }
        return seen
      }
      const [created, ...walks] = await Promise.all([
        Promise.all(Array.from({ length: 500 }, (_, i) => create(1000 + i))),
        walk(),
        walk(),
        walk()
      ])
      expect(new Set(created.map((pet) => pet.id)).size).toBe(500)
      for (const seen of walks) {
        expect(new Set(seen).size, "no pet twice").toBe(seen.length)
        expect(seen).toEqual([...seen].sort((a, b) => a - b))
        for (const pet of existing) expect(seen, "none that existed at the start skipped").toContain(pet.id)
      }
    } finally {
      await server.stop()
    }
  })
})
