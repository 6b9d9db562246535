import { describe, expect, it } from "@effect/vitest"
import { join } from "node:path"
import { hashKey } from "../src/Auth/ApiKeys.js"
import { createTestDatabase } from "./support/PostgresStores.js"
import { freePort, runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

/** A fresh database of each kind, named by its `DATABASE_URL`. */
const databases = [
  ["a temporary SQLite file", async () => {
    const folder = temporaryFolder()
    return { url: join(folder.path, "petstore.db"), [Symbol.asyncDispose]: async () => folder[Symbol.dispose]() }
  }],
  ["a PostgreSQL database", createTestDatabase]
] as const

for (const [name, createDatabase] of databases) {
  describe(`the real server process on ${name}`, () => {
    it("serves the whole contract over HTTP, with keys made by the command line", async () => {
      await using database = await createDatabase()
      const env = { DATABASE_URL: database.url, LOG_LEVEL: "Info" }
      const server = await startServer(env)
      try {
        const created = await runCommand(["src/bin/keys.ts", "create", "--name", "e2e"], env)
        expect(created.exitCode).toBe(0)
        const key = created.stdout.trim().split("\n").at(-1)!
        expect(key).toMatch(/^ps_test_[A-Za-z0-9_-]{43}$/)
        const auth = { authorization: `Bearer ${key}` }

        const post = await fetch(`${server.url}/v1/pets`, {
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body: JSON.stringify({ name: "Rex", categoryId: 3, status: "pending" })
        })
        expect(post.status).toBe(201)
        expect(post.headers.get("location")).toBe("/v1/pets/1")
        expect(await post.json()).toEqual({ id: 1, name: "Rex", categoryId: 3, status: "pending" })

        const list = await fetch(`${server.url}/v1/pets?status=pending`, { headers: auth })
        expect(await list.json()).toEqual([{ id: 1, name: "Rex", categoryId: 3, status: "pending" }])
        const get = await fetch(`${server.url}/v1/pets/1`, { headers: auth })
        expect(get.status).toBe(200)
        expect(get.headers.get("sunset")).toBe("Thu, 05 Dec 2030 00:00:00 GMT")
        expect((await fetch(`${server.url}/readyz`)).status).toBe(200)

        const listed = await runCommand(["src/bin/keys.ts", "list"], env)
        expect(listed.stdout).toMatch(/1\s+e2e\s+ps_test_/)
        expect(listed.stdout).not.toContain(key)
        const revoked = await runCommand(["src/bin/keys.ts", "revoke", "1"], env)
        expect(revoked.exitCode).toBe(0)
        // Refused within a second: the service trusts a key it found valid for half a second.
        await waitFor(async () => (await fetch(`${server.url}/v1/pets`, { headers: auth })).status === 401, {
          what: "the revoked key refused with 401",
          timeout: 1000,
          interval: 50
        })
        const unknown = await runCommand(["src/bin/keys.ts", "revoke", "99"], env)
        expect(unknown.exitCode).not.toBe(0)
        expect(unknown.stderr).toBe("id: no API key has id 99\n")

        // One structured line per request; never the key nor the Authorization header.
        const lines = server.logs().trim().split("\n").map((line) => JSON.parse(line))
        const requests = lines.filter((line) => line.message === "request")
        expect(requests.length).toBeGreaterThanOrEqual(5)
        expect(requests[0].annotations).toMatchObject({ method: expect.any(String), path: expect.any(String) })
        for (const line of requests) {
          expect(Object.keys(line.annotations).sort()).toEqual([
            "client",
            "durationMs",
            "method",
            "path",
            "requestId",
            "route",
            "status"
          ])
        }
        expect(server.logs()).not.toContain(key)
        expect(server.logs().toLowerCase()).not.toContain("authorization")
        // Nor the key's hash or a stack trace, in the logs or the served document.
        const document = await (await fetch(`${server.url}/v1/openapi.json`)).text()
        for (const text of [server.logs(), document]) {
          expect(text).not.toContain(hashKey(key))
          expect(text).not.toContain(key.slice(8))
          expect(text).not.toMatch(/\n\s+at |\\n\s+at /)
        }
      } finally {
        await server.stop()
      }
    })

    it("keeps the pets across a restart, and stops with exit 0 on SIGTERM after finishing requests in flight", async () => {
      await using database = await createDatabase()
      const metricsPort = freePort()
      const env = { DATABASE_URL: database.url, METRICS_PORT: String(metricsPort) }
      const key = (await runCommand(["src/bin/keys.ts", "create", "--name", "e2e"], env)).stdout.trim().split("\n").at(
        -1
      )!
      const server = await startServer(env)
      // A request still uploading its body when the signal arrives.
      const body = new TransformStream<Uint8Array, Uint8Array>()
      const writer = body.writable.getWriter()
      const inFlight = fetch(`${server.url}/v1/pets`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: body.readable,
        // @ts-expect-error Bun and Node need this for a streamed request body
        duplex: "half"
      })
      await writer.write(new TextEncoder().encode(`{"name":"Slow",`))
      // The signal is sent once the server is handling the request, however loaded the machine.
      const inHandling = async () => {
        const text = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text(), () => "")
        return /^http_server_active_requests 1$/m.test(text)
      }
      await waitFor(inHandling, { what: "the request in the server's hands" })
      server.proc.kill("SIGTERM")
      await waitFor(() => server.logs().includes(`"stopping: finishing the requests in flight"`), {
        what: "the stop begun"
      })
      await writer.write(new TextEncoder().encode(`"categoryId":1}`))
      await writer.close()
      const response = await inFlight
      expect(response.status).toBe(201)
      expect(await response.json()).toEqual({ id: 1, name: "Slow", categoryId: 1 })
      expect(await server.proc.exited).toBe(0)

      const again = await startServer(env)
      try {
        const pets = await fetch(`${again.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
        expect(await pets.json()).toEqual([{ id: 1, name: "Slow", categoryId: 1 }])
      } finally {
        expect(await again.stop("SIGINT")).toBe(0)
      }
    })
  })
}

describe("the real server process", () => {
  it("refuses a bad configuration at start: a message naming the variable, exit code 1", async () => {
    for (
      const [name, value] of [
        ["PORT", "eighty"],
        ["PETSTORE_ENV", "testing"],
        ["PUBLIC_BASE_URL", "not a url"],
        ["DATABASE_URL", "mysql://db/pets"],
        ["DATABASE_URL", ":memory:"],
        ["TRUSTED_PROXIES", "10.0.0.0/8, proxy.internal"],
        ["TRUSTED_PROXIES", "10.0.0.0/33"],
        ["CORS_ORIGINS", "example.com"]
      ]
    ) {
      const result = await runCommand(["src/bin/main.ts"], { [name!]: value! })
      expect(result.exitCode, name).toBe(1)
      expect(result.stdout + result.stderr, name).toContain(name)
    }
  })
})
