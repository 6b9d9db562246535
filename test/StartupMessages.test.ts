import { describe, expect, it } from "@effect/vitest"
import { join } from "node:path"
import { freePort, runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"

/** The one line a failed start logs, and its exit code. */
const start = async (env: Record<string, string>) => {
  const { exitCode, stderr, stdout } = await runCommand(["src/bin/main.ts"], env)
  return { exitCode, output: stdout + stderr }
}

describe("a start that cannot succeed says why in words a person can act on, and exits 1", () => {
  it("WORKERS=abc names WORKERS and its rule", async () => {
    const { exitCode, output } = await start({ WORKERS: "abc" })
    expect(exitCode).toBe(1)
    expect(output).toContain(`Invalid data at WORKERS: \\"must be auto or a whole number of processes from 1 to 256\\"`)
  })

  it("DATABASE_URL=sqlite: (or file:) says the file's path is empty", async () => {
    for (const url of ["sqlite:", "file:", "sqlite://"]) {
      const { exitCode, output } = await start({ DATABASE_URL: url })
      expect(exitCode, url).toBe(1)
      expect(output, url).toContain(
        `Invalid data at DATABASE_URL: \\"names no SQLite file: the path after sqlite: or file: is empty\\"`
      )
    }
  })

  it("an unreachable PostgreSQL names its host, its port and DATABASE_URL, never the password", async () => {
    const port = freePort()
    const password = "Sup3r-s3cret-pa55"
    const refused = await start({
      DATABASE_URL: `postgres://petstore:${password}@127.0.0.1:${port}/petstore`,
      DATABASE_START_TIMEOUT_SECONDS: "1"
    })
    expect(refused.exitCode).toBe(1)
    expect(refused.output).toContain(
      `Cannot connect to the PostgreSQL database at 127.0.0.1:${port} that DATABASE_URL names: connect ECONNREFUSED`
    )
    const unknownHost = await start({ DATABASE_URL: `postgresql://petstore:${password}@db.nonexistent.invalid/petstore` })
    expect(unknownHost.exitCode).toBe(1)
    expect(unknownHost.output).toContain(
      "Cannot connect to the PostgreSQL database at db.nonexistent.invalid:5432 that DATABASE_URL names"
    )
    for (const { output } of [refused, unknownHost]) expect(output).not.toContain(password)
  })
})

describe("LOG_LEVEL", () => {
  it("warn: no INFO line from the supervisor, its workers or their requests, from start to stop", async () => {
    using folder = temporaryFolder()
    const server = await startServer({ DATABASE_URL: join(folder.path, "petstore.db"), LOG_LEVEL: "warn", WORKERS: "2" })
    try {
      expect((await fetch(`${server.url}/v1/pets`)).status).toBe(401)
    } finally {
      expect(await server.stop()).toBe(0)
    }
    const lines = server.logs().split("\n").filter((line) => line !== "")
    expect(lines.filter((line) => line.includes(`"logLevel":"INFO"`) || line.includes(`"listening"`))).toEqual([])
  })

  it("off: a start that fails still says why", async () => {
    const { exitCode, output } = await start({ LOG_LEVEL: "off", WORKERS: "abc" })
    expect(exitCode).toBe(1)
    expect(output).toContain("Invalid data at WORKERS")
  })
})
