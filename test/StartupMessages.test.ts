import { describe, expect, it } from "@effect/vitest"
import { existsSync, readdirSync, writeFileSync } from "node:fs"
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

  it("on PostgreSQL, DATABASE_CONNECT_TIMEOUT_SECONDS not below REQUEST_TIMEOUT_SECONDS names both; SQLite opens no connection and is not held to it", async () => {
    const postgres = { DATABASE_URL: `postgres://petstore@127.0.0.1:${freePort()}/petstore` }
    for (
      const env of [{ REQUEST_TIMEOUT_SECONDS: "2" }, {
        REQUEST_TIMEOUT_SECONDS: "4",
        DATABASE_CONNECT_TIMEOUT_SECONDS: "4"
      }]
    ) {
      const { exitCode, output } = await start({ ...postgres, ...env })
      expect(exitCode).toBe(1)
      expect(output).toContain(
        "Invalid data at DATABASE_CONNECT_TIMEOUT_SECONDS: \\\"must be below REQUEST_TIMEOUT_SECONDS"
      )
    }
    using folder = temporaryFolder()
    const sqlite = await runCommand(["src/bin/keys.ts", "list"], {
      DATABASE_URL: join(folder.path, "petstore.db"),
      REQUEST_TIMEOUT_SECONDS: "2"
    })
    expect(sqlite.stdout + sqlite.stderr).not.toContain("DATABASE_CONNECT_TIMEOUT_SECONDS")
    expect(sqlite.exitCode).toBe(0)
  })

  it("METRICS_PORT equal to PORT on overlapping addresses names both; on addresses apart both listen", async () => {
    using folder = temporaryFolder()
    const port = freePort()
    const database = { DATABASE_URL: join(folder.path, "petstore.db") }
    const overlapping = [["127.0.0.1", "127.0.0.1"], ["0.0.0.0", "127.0.0.1"], ["127.0.0.1", "0.0.0.0"], [
      "::",
      "127.0.0.1"
    ], ["127.0.0.1", "::"]]
    for (const [host, metricsHost] of overlapping) {
      const { exitCode, output } = await start({
        ...database,
        HOST: host!,
        PORT: String(port),
        METRICS_HOST: metricsHost!,
        METRICS_PORT: String(port)
      })
      expect(exitCode, `${host} ${metricsHost}`).toBe(1)
      expect(output.trim().split("\n"), `${host} ${metricsHost}`).toEqual([
        expect.stringContaining(
          `Invalid data at METRICS_PORT: \\"must differ from PORT where METRICS_HOST (${metricsHost}) and HOST (${host}) overlap; both are ${port}\\"`
        )
      ])
    }
    expect(existsSync(database.DATABASE_URL)).toBe(false)
    const server = await startServer({
      ...database,
      HOST: "127.0.0.1",
      METRICS_HOST: "127.0.0.2",
      METRICS_PORT: String(port)
    }, port)
    try {
      expect((await fetch(`${server.url}/livez`)).status).toBe(200)
      expect((await fetch(`http://127.0.0.2:${port}/metrics`)).status).toBe(200)
    } finally {
      expect(await server.stop()).toBe(0)
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
    const unknownHost = await start({
      DATABASE_URL: `postgresql://petstore:${password}@db.nonexistent.invalid/petstore`
    })
    expect(unknownHost.exitCode).toBe(1)
    expect(unknownHost.output).toContain(
      "Cannot connect to the PostgreSQL database at db.nonexistent.invalid:5432 that DATABASE_URL names"
    )
    // Only a refusal is retried, and only a retry is logged as one.
    expect(unknownHost.output).not.toContain("retrying")
    for (const { output } of [refused, unknownHost]) expect(output).not.toContain(password)
  })
})

/** The service, `keys` and `db` on `env`, each as its one line of output, its exit code and how long it took. */
const everyCommand = (env: Record<string, string>) =>
  Promise.all(
    [["src/bin/main.ts"], ["src/bin/keys.ts", "create", "--name", "slip"], ["src/bin/db.ts", "status"]].map(
      async (args) => {
        const startedAt = performance.now()
        const { exitCode, stderr, stdout } = await runCommand(args, {
          PORT: String(freePort()),
          METRICS_PORT: "off",
          ...env
        })
        return {
          command: args[0]!,
          exitCode,
          lines: (stdout + stderr).trim().split("\n"),
          millis: performance.now() - startedAt
        }
      }
    )
  )

describe("DATABASE_URL slips are refused at start, in one line, by the service, keys and db alike, with nothing created", () => {
  it("a SQLite file in a folder that does not exist: the folder is not made", async () => {
    using folder = temporaryFolder()
    const missing = join(folder.path, "missing", "deeper")
    for (const url of [join(missing, "petstore.db"), `sqlite:${join(missing, "petstore.db")}`]) {
      for (const { command, exitCode, lines } of await everyCommand({ DATABASE_URL: url })) {
        expect(exitCode, command).toBe(1)
        expect(lines, command).toHaveLength(1)
        expect(lines[0], command).toContain("DATABASE_URL")
        expect(lines[0], command).toContain(
          `names a file in ${missing}, a folder that does not exist: create the folder, or correct the path`
        )
        expect(existsSync(join(folder.path, "missing")), command).toBe(false)
      }
    }
  })

  it("DATABASE_URL_FILE set beside DATABASE_URL, or naming a file that cannot be read: the file is named", async () => {
    using folder = temporaryFolder()
    const file = join(folder.path, "database-url")
    writeFileSync(file, `${join(folder.path, "petstore.db")}\n`)
    const refusals = [
      [
        { DATABASE_URL_FILE: file, DATABASE_URL: join(folder.path, "other.db") },
        "DATABASE_URL_FILE",
        "is set as well as DATABASE_URL: set one of them"
      ],
      [
        { DATABASE_URL_FILE: join(folder.path, "missing") },
        "DATABASE_URL_FILE",
        `names ${join(folder.path, "missing")}, which cannot be read (ENOENT: no such file or directory)`
      ]
    ] as const
    for (const [env, name, message] of refusals) {
      for (const { command, exitCode, lines } of await everyCommand(env)) {
        expect(exitCode, command).toBe(1)
        expect(lines, command).toHaveLength(1)
        expect(lines[0], command).toContain(name)
        expect(lines[0], command).toContain(message)
      }
    }
    expect(readdirSync(folder.path)).toEqual(["database-url"])
  })

  it("the default (DATABASE_URL unset) still has its folder made on first run", async () => {
    using folder = temporaryFolder()
    const root = join(import.meta.dirname, "..")
    const { DATABASE_URL: _, ...unset } = process.env
    const run = (args: Array<string>) =>
      Bun.spawnSync(["bun", join(root, args[0]!), ...args.slice(1)], { cwd: folder.path, env: unset })
    const created = run(["src/bin/keys.ts", "create", "--name", "first"])
    expect(created.exitCode, created.stderr.toString()).toBe(0)
    expect(existsSync(join(folder.path, "data", "petstore.db"))).toBe(true)
    const status = run(["src/bin/db.ts", "status"])
    expect(status.exitCode, status.stderr.toString()).toBe(0)
    expect(status.stdout.toString()).toContain("data/petstore.db")
  })

  it("a PostgreSQL password with an unencoded reserved character: no part of it printed or looked up, refused at once", async () => {
    const urls = [
      { url: "postgres://u:p@ss/w@cr:5432/db", parts: ["p@ss", "ss/w", "@ss", "cr:5432"] },
      {
        url: "postgresql://petstore:se#cr?et@db.nonexistent.invalid:5432/petstore",
        parts: ["se#cr", "cr?et", "#cr", "?et@"]
      }
    ]
    for (const { parts, url } of urls) {
      for (
        const { command, exitCode, lines, millis } of await everyCommand({
          DATABASE_URL: url,
          DATABASE_START_TIMEOUT_SECONDS: "5"
        })
      ) {
        expect(exitCode, command).toBe(1)
        expect(lines, command).toHaveLength(1)
        expect(lines[0], command).toContain("DATABASE_URL")
        expect(lines[0], command).toContain(
          "is not a valid postgres:// URL (a password's reserved characters, such as @ / ? #, must be percent-encoded)"
        )
        // A lookup of a part of the password would fail as ENOTFOUND, or be retried until the start timeout.
        expect(lines[0], command).not.toContain("ENOTFOUND")
        for (const part of parts) expect(lines[0], command).not.toContain(part)
        expect(millis, command).toBeLessThan(4000)
      }
    }
  })
})

describe("LOG_LEVEL", () => {
  it("warn: no INFO line from the supervisor, its workers or their requests, from start to stop", async () => {
    using folder = temporaryFolder()
    const server = await startServer({
      DATABASE_URL: join(folder.path, "petstore.db"),
      LOG_LEVEL: "warn",
      WORKERS: "2"
    })
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
