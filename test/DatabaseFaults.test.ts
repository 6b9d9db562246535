import { describe, expect, it } from "@effect/vitest"
import { faultyPostgres } from "./support/PostgresFaults.js"
import { runCommand, startServer } from "./support/ServerProcess.js"

// Short, so that the deadline is seen without waiting out the production default of 5 s.
const requestTimeoutSeconds = 1

const timed = async (request: Promise<Response>) => {
  const startedAt = performance.now()
  const response = await request
  const body = await response.text()
  return { status: response.status, headers: response.headers, body, millis: performance.now() - startedAt }
}

const requestLines = (logs: string) =>
  logs.split("\n").filter((line) => line.includes(`"message":"request"`)).map((line) => JSON.parse(line).annotations)

describe("PostgreSQL stopped (SIGSTOP) under requests", () => {
  it("API requests answer 503 with Retry-After within the deadline, /readyz 503 within 1 s, /livez at once; all recover after SIGCONT", async () => {
    using postgres = faultyPostgres()
    const env = { DATABASE_URL: postgres.url, REQUEST_TIMEOUT_SECONDS: String(requestTimeoutSeconds) }
    const key = (await runCommand(["src/keys.ts", "create", "--name", "faults"], env)).stdout.trim().split("\n").at(-1)!
    const server = await startServer(env)
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
    const create = (name: string) =>
      fetch(`${server.url}/v1/pets`, { method: "POST", headers, body: JSON.stringify({ name, categoryId: 1 }) })
    try {
      const acknowledged: Array<number> = []
      for (const name of ["a", "b", "c"]) {
        const response = await create(name)
        expect(response.status).toBe(201)
        acknowledged.push((await response.json()).id)
      }

      postgres.freeze()
      const [list, created, ready, live] = await Promise.all([
        timed(fetch(`${server.url}/v1/pets`, { headers })),
        timed(create("during")),
        timed(fetch(`${server.url}/readyz`)),
        timed(fetch(`${server.url}/livez`))
      ])
      expect(live.status).toBe(200)
      expect(live.millis).toBeLessThan(250)
      expect(ready.status).toBe(503)
      expect(ready.millis).toBeLessThan(1000)
      for (const answer of [list, created]) {
        expect(answer.status).toBe(503)
        expect(JSON.parse(answer.body)).toEqual({
          code: "request_timeout",
          message: expect.stringContaining("retry"),
          status: 503
        })
        expect(answer.headers.get("retry-after")).toBe("1")
        expect(answer.millis).toBeGreaterThanOrEqual(requestTimeoutSeconds * 1000 - 50)
        expect(answer.millis).toBeLessThan(requestTimeoutSeconds * 1000 + 1000)
      }
      // A request's line is written after its answer: give it a moment.
      const statuses = () => requestLines(server.logs()).filter((line) => line.path === "/v1/pets").map((line) => line.status)
      for (let waited = 0; statuses().length < 5 && waited < 40; waited++) await Bun.sleep(25)
      expect(statuses()).toEqual([201, 201, 201, 503, 503])

      postgres.thaw()
      const resumedAt = performance.now()
      while ((await fetch(`${server.url}/readyz`)).status !== 200) {
        expect(performance.now() - resumedAt).toBeLessThan(1000)
        await Bun.sleep(50)
      }
      const after = await fetch(`${server.url}/v1/pets?limit=100`, { headers }).then((r) => r.json())
      const ids = after.map((pet: { id: number }) => pet.id)
      expect(ids).toEqual(expect.arrayContaining(acknowledged))
      expect(new Set(ids).size).toBe(ids.length)
    } finally {
      postgres.thaw()
      await server.stop()
    }
  })
})
