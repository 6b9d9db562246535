import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { newPetOptionNames } from "../src/CommandLine/NewPetOptions.js"
import { petTable } from "../src/CommandLine/PetTable.js"
import { describeFailure } from "../src/CommandLine/Run.js"
import { NewPet, type Pet } from "../src/Domain/Pet.js"
import { everyField } from "./support/Pets.js"
import { runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"

const root = new URL("..", import.meta.url).pathname

/** No variable of the command lines leaks in from the environment the tests run in. */
const clean = { PETSTORE_BASE_URL: "", PETSTORE_API_KEY: "", NO_COLOR: "" }

/** A command run on a pseudo-terminal (util-linux `script`), as a person at a terminal runs it. */
const onTerminal = async (command: string, env: Record<string, string>) => {
  const proc = Bun.spawn(["script", "-qec", command, "/dev/null"], {
    cwd: root,
    env: { ...process.env, ...env },
    stdout: "pipe",
    stderr: "pipe"
  })
  const output = await new Response(proc.stdout).text()
  expect(await proc.exited).toBe(0)
  return output
}

// oxlint-disable-next-line no-control-regex -- the escape that starts a colour is what is looked for
const ansi = /\x1b\[/

describe("petstore, the command line", () => {
  it("takes --base-url, else PETSTORE_BASE_URL, else http://localhost:3000", async () => {
    using folder = temporaryFolder()
    const env = { ...clean, DATABASE_URL: join(folder.path, "petstore.db") }
    const server = await startServer(env)
    try {
      const key = (await runCommand(["src/bin/keys.ts", "create", "--name", "cli"], env)).stdout.trim().split("\n").at(
        -1
      )!
      const withKey = { ...env, PETSTORE_API_KEY: key }

      const fromVariable = await runCommand(["src/bin/cli.ts", "pets", "list", "--json"], {
        ...withKey,
        PETSTORE_BASE_URL: server.url
      })
      expect(fromVariable.stderr).toBe("")
      expect(JSON.parse(fromVariable.stdout)).toEqual([])

      // The option wins over the variable, which names nothing that answers.
      const fromOption = await runCommand(["src/bin/cli.ts", "pets", "list", "--json", "--base-url", server.url], {
        ...withKey,
        PETSTORE_BASE_URL: "http://127.0.0.1:9"
      })
      expect(fromOption.stderr).toBe("")
      expect(JSON.parse(fromOption.stdout)).toEqual([])

      // Neither: the local default, named in the error when nothing answers there.
      const fromDefault = await runCommand(["src/bin/cli.ts", "pets", "list"], withKey)
      expect(fromDefault.exitCode).toBe(1)
      expect(fromDefault.stderr).toMatch(
        /^base URL: nothing answers at http:\/\/localhost:3000 .*; set --base-url or PETSTORE_BASE_URL\n$/
      )
    } finally {
      await server.stop()
    }
  })

  it("reports each error as one plain line naming the field and the rule, and exits 1", async () => {
    const env = { ...clean, PETSTORE_API_KEY: "ps_test_unused", PETSTORE_BASE_URL: "http://127.0.0.1:9" }
    const cases: ReadonlyArray<readonly [ReadonlyArray<string>, Record<string, string>, string]> = [
      [
        ["pets", "create", "--name", "", "--category-id", "1"],
        env,
        "--name: must be a string of 1 to 255 characters of Unicode text without U+0000"
      ],
      [
        ["pets", "create", "--name", "Rex", "--category-id", "x1"],
        env,
        "--category-id: must be an integer (got \"x1\")"
      ],
      [["pets", "list", "--limit", "0"], env, "--limit: must be an integer from 1 to 100"],
      [["pets", "list", "--status", "lost"], env, "--status: must be one of available, pending, sold (got \"lost\")"],
      [["pets", "get", "abc"], env, "id: must be an integer (got \"abc\")"],
      [
        ["pets", "list", "--base-url", "localhost:3000"],
        env,
        "--base-url: must be an absolute http(s) URL (got \"localhost:3000\")"
      ],
      [
        ["pets", "list"],
        { ...env, PETSTORE_BASE_URL: "ftp://x" },
        "PETSTORE_BASE_URL: must be an absolute http(s) URL"
      ],
      [["pets", "list"], { ...env, PETSTORE_API_KEY: "" }, "PETSTORE_API_KEY: must be set"],
      [["pets", "create", "--category-id", "1"], env, "Expected to find option: '--name'"]
    ]
    for (const [args, variables, message] of cases) {
      const result = await runCommand(["src/bin/cli.ts", ...args], variables)
      expect({ args, stdout: result.stdout, stderr: result.stderr, exitCode: result.exitCode }).toEqual({
        args,
        stdout: "",
        stderr: `${message}\n`,
        exitCode: 1
      })
    }
  })

  it("keys create refuses an empty name in one plain line, and creates nothing", async () => {
    using folder = temporaryFolder()
    const env = { DATABASE_URL: join(folder.path, "keys.db") }
    for (const name of ["", "   ", "x".repeat(256)]) {
      const result = await runCommand(["src/bin/keys.ts", "create", "--name", name], env)
      expect(result.exitCode, JSON.stringify(name)).toBe(1)
      expect(result.stderr).toMatch(/^--name: must be 1 to 255 characters, not only spaces \(got ".*"\)\n$/)
    }
    expect(JSON.parse((await runCommand(["src/bin/keys.ts", "list", "--json"], env)).stdout)).toEqual([])
  })

  it("--help has no ANSI colours when not on a terminal, nor on one with NO_COLOR set; keys --help opens no database", async () => {
    const piped = await runCommand(["src/bin/cli.ts", "pets", "list", "--help"], clean)
    expect(piped.exitCode).toBe(0)
    expect(piped.stdout).toContain("--base-url url")
    expect(piped.stdout).not.toMatch(ansi)

    expect(await onTerminal("bun src/bin/cli.ts --help", clean)).toMatch(ansi)
    const noColor = await onTerminal("bun src/bin/cli.ts --help", { NO_COLOR: "1" })
    expect(noColor).toContain("USAGE")
    expect(noColor).not.toMatch(ansi)
    expect(await onTerminal("bun src/bin/keys.ts --help", { NO_COLOR: "1" })).not.toMatch(ansi)

    // `keys --help` opens no database: it works with none, and creates no file.
    using folder = temporaryFolder()
    const database = join(folder.path, "petstore.db")
    const keysHelp = await runCommand(["src/bin/keys.ts", "revoke", "--help"], { ...clean, DATABASE_URL: database })
    expect(keysHelp.exitCode).toBe(0)
    expect(keysHelp.stdout).toContain("Revoke an API key")
    expect(keysHelp.stdout).not.toMatch(ansi)
    expect(existsSync(database)).toBe(false)
  })
})

describe("what petstore pets prints", () => {
  it("a table with a column per field of a pet, in the schema's order, aligned; - for a field left out", () => {
    const fields = Object.keys(NewPet.fields)
    const pets: ReadonlyArray<Pet> = [{ id: 1, ...everyField }, { id: 22, name: "Tom", categoryId: 4 }]
    const [header, ...lines] = petTable(pets).split("\n")
    expect(header!.split(/ {2,}/)).toEqual(["id", ...fields])
    // Each column starts where its heading does.
    const starts = ["id", ...fields].map((field) => header!.indexOf(field))
    const cells = (line: string) => starts.map((start, i) => line.slice(start, starts[i + 1]).trimEnd())
    expect(lines.map(cells)).toEqual(
      pets.map((pet) => ["id", ...fields].map((field) => field in pet ? String(pet[field as keyof Pet]) : "-"))
    )
  })

  it("an error names the option that set the field, and where inside it: a list's item by its position", () => {
    expect(newPetOptionNames).toMatchObject({ name: "--name", categoryId: "--category-id" })
    const Tagged = Schema.Struct({
      tags: Schema.Array(Schema.String.check(Schema.isMinLength(1, { message: "must not be empty" })))
    })
    const error = Effect.runSync(Effect.flip(Schema.decodeUnknownEffect(Tagged)({ tags: ["a", ""] })))
    expect(describeFailure(error, { tags: "--tags" })).toBe("--tags (value 2): must not be empty")
  })
})

describe("petstore keys, the command line", () => {
  it("list --json prints the records as a JSON array, never a key", async () => {
    using folder = temporaryFolder()
    const env = { ...clean, DATABASE_URL: join(folder.path, "petstore.db") }
    const keys = (...args: Array<string>) => runCommand(["src/bin/keys.ts", ...args], env)
    expect(JSON.parse((await keys("list", "--json")).stdout)).toEqual([])
    const alice = (await keys("create", "--name", "alice")).stdout.trim().split("\n").at(-1)!
    const bob = (await keys("create", "--name", "bob")).stdout.trim().split("\n").at(-1)!
    expect((await keys("revoke", "1")).exitCode).toBe(0)

    const listed = await keys("list", "--json")
    expect(listed.exitCode).toBe(0)
    const iso = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    expect(JSON.parse(listed.stdout)).toEqual([
      { id: 1, name: "alice", prefix: alice.slice(0, 12), createdAt: iso, revokedAt: iso },
      { id: 2, name: "bob", prefix: bob.slice(0, 12), createdAt: iso, revokedAt: null }
    ])
    expect(listed.stdout).not.toContain(alice)
    expect(listed.stdout).not.toContain(bob)
  })

  it("revoking a revoked key says so, exits 1 and keeps the first revocation time", async () => {
    using folder = temporaryFolder()
    const env = { ...clean, DATABASE_URL: join(folder.path, "petstore.db") }
    const keys = (...args: Array<string>) => runCommand(["src/bin/keys.ts", ...args], env)
    await keys("create", "--name", "laptop")
    expect(await keys("revoke", "1")).toMatchObject({ exitCode: 0, stdout: "Revoked key 1 (laptop)\n" })
    const [{ revokedAt }] = JSON.parse((await keys("list", "--json")).stdout)

    const again = await keys("revoke", "1")
    expect(again).toMatchObject({
      exitCode: 1,
      stdout: "",
      stderr: `id: API key 1 (laptop) was already revoked at ${revokedAt}\n`
    })
    expect(JSON.parse((await keys("list", "--json")).stdout)[0].revokedAt).toBe(revokedAt)

    expect(await keys("revoke", "abc")).toMatchObject({ exitCode: 1, stderr: "id: must be an integer (got \"abc\")\n" })
    expect(await keys("revoke", "7")).toMatchObject({ exitCode: 1, stderr: "id: no API key has id 7\n" })
  })
})
