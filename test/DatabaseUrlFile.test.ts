import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit } from "effect"
import { chmodSync, existsSync, readdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { AppConfig, describeConfigError } from "../src/Config/AppConfig.js"
import { createKey, runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"

/** The database URL the service's settings make of `env`, or the one line a refusal prints. */
const databaseUrlFrom = (env: Record<string, string>) =>
  Effect.map(AppConfig.config, ({ databaseUrl }) => databaseUrl).pipe(
    Effect.mapError(describeConfigError),
    Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env })),
    Effect.exit
  )

const password = "s3cret-pa55"

describe("DATABASE_URL_FILE, read as the service's settings", () => {
  it.effect("is the file's content without the newline that ends it", () =>
    Effect.gen(function*() {
      using folder = temporaryFolder()
      const file = join(folder.path, "database-url")
      const url = `postgres://petstore:${password}@db.internal:5432/petstore`
      for (const content of [`${url}\n`, `${url}\r\n`, url]) {
        writeFileSync(file, content)
        expect(yield* databaseUrlFrom({ DATABASE_URL_FILE: file }), JSON.stringify(content)).toEqual(Exit.succeed(url))
      }
    }))

  it.effect("set beside DATABASE_URL is refused, naming both", () =>
    Effect.gen(function*() {
      using folder = temporaryFolder()
      const file = join(folder.path, "database-url")
      writeFileSync(file, join(folder.path, "petstore.db"))
      expect(yield* databaseUrlFrom({ DATABASE_URL_FILE: file, DATABASE_URL: join(folder.path, "petstore.db") }))
        .toEqual(
          Exit.fail(`Invalid data at DATABASE_URL_FILE: "is set as well as DATABASE_URL: set one of them"`)
        )
    }))

  it.effect("a file that is missing, a folder, or not readable is refused, naming it", () =>
    Effect.gen(function*() {
      using folder = temporaryFolder()
      const missing = join(folder.path, "missing")
      expect(yield* databaseUrlFrom({ DATABASE_URL_FILE: missing })).toEqual(
        Exit.fail(
          `Invalid data at DATABASE_URL_FILE: "names ${missing}, which cannot be read (ENOENT: no such file or directory)"`
        )
      )
      expect(yield* databaseUrlFrom({ DATABASE_URL_FILE: folder.path })).toEqual(
        Exit.fail(
          `Invalid data at DATABASE_URL_FILE: "names ${folder.path}, which cannot be read (EISDIR: illegal operation on a directory, read)"`
        )
      )
      // Root reads any file whatever its mode.
      if (process.getuid?.() !== 0) {
        const locked = join(folder.path, "locked")
        writeFileSync(locked, "petstore.db")
        chmodSync(locked, 0o000)
        expect(yield* databaseUrlFrom({ DATABASE_URL_FILE: locked })).toEqual(
          Exit.fail(
            `Invalid data at DATABASE_URL_FILE: "names ${locked}, which cannot be read (EACCES: permission denied)"`
          )
        )
      }
    }))

  it.effect("a URL in it that DATABASE_URL would refuse is refused, naming the file, never quoting the URL", () =>
    Effect.gen(function*() {
      using folder = temporaryFolder()
      const file = join(folder.path, "database-url")
      writeFileSync(file, `postgres://petstore:${password}#@db.internal:5432/petstore\n`)
      const exit = yield* databaseUrlFrom({ DATABASE_URL_FILE: file })
      expect(exit).toEqual(Exit.fail(
        `Invalid data at DATABASE_URL_FILE: "the URL in ${file} is not a valid postgres:// URL (a password's reserved characters, such as @ / ? #, must be percent-encoded)"`
      ))
      expect(JSON.stringify(exit)).not.toContain(password)
      writeFileSync(file, `${join(folder.path, "missing", "petstore.db")}\n`)
      expect(yield* databaseUrlFrom({ DATABASE_URL_FILE: file })).toEqual(Exit.fail(
        `Invalid data at DATABASE_URL_FILE: "the URL in ${file} names a file in ${
          join(folder.path, "missing")
        }, a folder that does not exist: create the folder, or correct the path"`
      ))
    }))
})

describe("DATABASE_URL_FILE names the database for the service, keys and db alike", () => {
  it("a key made by keys on the file's database is taken by the service on it; db reports that database", async () => {
    using folder = temporaryFolder()
    const database = join(folder.path, "petstore.db")
    const file = join(folder.path, "database-url")
    writeFileSync(file, `${database}\n`)
    const env = { DATABASE_URL_FILE: file }
    const key = await createKey(env)
    const status = await runCommand(["src/bin/db.ts", "status"], env)
    expect(status.exitCode, status.stderr).toBe(0)
    expect(status.stdout).toMatch(new RegExp(`^database +${database}$`, "m"))
    const server = await startServer(env)
    try {
      expect((await fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200)
    } finally {
      expect(await server.stop()).toBe(0)
    }
    // The newline was not taken into the name: no second database was made beside it.
    expect(existsSync(database)).toBe(true)
    expect(readdirSync(folder.path).filter((name) => name.includes("\n"))).toEqual([])
  })
})
