import { describe, expect, it } from "@effect/vitest"
import { createHash } from "node:crypto"
import { copyFileSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { basename, join } from "node:path"
import { createKey, db, pgQuery, sqliteQuery } from "./support/MoveCommands.js"
import { serverBin } from "./support/PostgresCluster.js"
import { createTestDatabase } from "./support/PostgresStores.js"
import { createPet, startServer, temporaryFolder } from "./support/ServerProcess.js"
import { sharedPostgresUrl } from "./support/SharedPostgres.js"

const createPets = async (url: string, key: string, count: number) => {
  const ids: Array<number> = []
  for (let i = 0; i < count; i++) ids.push(await createPet(url, key, `pet ${i}`))
  return ids
}

/** A file's bytes, and those of SQLite's companions beside it, as a digest: "as it was" compared byte for byte. */
const digest = (file: string) =>
  ["", "-wal", "-shm"].map((suffix) =>
    existsSync(`${file}${suffix}`)
      ? createHash("sha256").update(readFileSync(`${file}${suffix}`)).digest("hex")
      : "none"
  ).join(" ")

/** What a restore may leave in the folder besides the database and its backups: nothing of its own. */
const leftovers = (folder: string) => readdirSync(folder).filter((name) => name.includes(".restoring"))

/** A SQLite store made by the service: a key, `pets` pets, and a backup taken while it serves. */
const storeWithBackup = async (folder: string, pets: number) => {
  const file = join(folder, "petstore.db")
  const backupFile = join(folder, "backups", "petstore.db")
  const key = await createKey(file)
  const server = await startServer({ DATABASE_URL: file })
  const before = await createPets(server.url, key, pets)
  const backup = await db(["backup", backupFile], { DATABASE_URL: file })
  expect(backup.exitCode).toBe(0)
  return { file, backupFile, key, server, before }
}

describe("db restore (SQLite)", () => {
  it("puts the backup back with the next id above every id the replaced file handed out, read from its WAL too; the backup untouched", async () => {
    using folder = temporaryFolder()
    const { backupFile, file, key, server, before } = await storeWithBackup(folder.path, 3)
    const after = await createPets(server.url, key, 3)
    // Killed: the pets made after the backup are in the WAL alone, never written back into the file.
    await server.stop("SIGKILL")
    expect(existsSync(`${file}-wal`)).toBe(true)
    const backupBytes = digest(backupFile)

    const restored = await db(["restore", backupFile], { DATABASE_URL: file })
    expect(restored.stderr).toBe("")
    expect(restored.exitCode).toBe(0)
    expect(restored.stdout.trim()).toMatch(
      new RegExp(
        `^restored ${file} from ${backupFile} in \\d+\\.\\d s \\(integrity check ok; pets 3, api_keys 1, settings 1, ` +
          `idempotency_keys 0\\); next ids pets 7, api_keys 2, above every id the replaced file handed out$`
      )
    )
    expect(digest(backupFile)).toBe(backupBytes)
    expect(sqliteQuery<{ id: number }>(file, "SELECT id FROM pets ORDER BY id").map(({ id }) => id)).toEqual(before)
    expect(existsSync(`${file}-wal`)).toBe(false)
    expect(leftovers(folder.path)).toEqual([])

    const again = await startServer({ DATABASE_URL: file })
    try {
      const id = await createPet(again.url, key, "after the restore")
      expect(id).toBeGreaterThan(Math.max(...before, ...after))
    } finally {
      await again.stop()
    }
  })

  it("refuses while a service runs on the file, which SQLite's lock tells, and leaves it as it was", async () => {
    using folder = temporaryFolder()
    const { backupFile, file, key, server } = await storeWithBackup(folder.path, 2)
    try {
      await createPets(server.url, key, 2)
      const refused = await db(["restore", "--ids-may-repeat", backupFile], { DATABASE_URL: file })
      expect(refused.exitCode).toBe(1)
      expect(refused.stdout).toBe("")
      expect(refused.stderr).toBe(
        `restore: ${file} is open in another process (SQLite's lock on the file is held, as a service running on it holds it); ` +
          "stop the service, then restore\n"
      )
      expect(leftovers(folder.path)).toEqual([])
      // The service goes on where it was.
      expect(await createPet(server.url, key, "still served")).toBe(5)
    } finally {
      await server.stop()
    }
  })

  it("where the replaced file is gone, says in one line that ids may repeat, and goes on only with --ids-may-repeat", async () => {
    using folder = temporaryFolder()
    const { backupFile, file, server } = await storeWithBackup(folder.path, 2)
    await server.stop()
    for (const suffix of ["", "-wal", "-shm"]) rmSync(`${file}${suffix}`, { force: true })
    const gone = `${file} is gone; the ids it handed out since the backup cannot be read, and may repeat`

    const refused = await db(["restore", backupFile], { DATABASE_URL: file })
    expect(refused.exitCode).toBe(1)
    expect(refused.stderr).toBe(`restore: ${gone}; give --ids-may-repeat to restore anyway\n`)
    expect(readdirSync(folder.path)).toEqual(["backups"])

    const told = await db(["restore", "--ids-may-repeat", backupFile], { DATABASE_URL: file })
    expect(told.exitCode).toBe(0)
    expect(told.stderr).toBe(`warning: ${gone}\n`)
    expect(told.stdout).toMatch(/; next ids pets 3, api_keys 2, the backup's own\n$/)
    expect(sqliteQuery(file, "SELECT count(*) AS pets FROM pets")).toEqual([{ pets: 2 }])
  })

  it("refuses a bad backup in one line, with the current file as it was", async () => {
    using folder = temporaryFolder()
    const { backupFile, file, server } = await storeWithBackup(folder.path, 20)
    await server.stop()
    const current = digest(file)

    const text = join(folder.path, "notes.txt")
    writeFileSync(text, "not a backup\n".repeat(100))
    const damaged = join(folder.path, "damaged.db")
    copyFileSync(backupFile, damaged)
    // The pets table's pages overwritten: a file SQLite opens, whose b-tree is broken.
    const bytes = readFileSync(damaged)
    const rootPage =
      sqliteQuery<{ rootpage: number }>(backupFile, "SELECT rootpage FROM sqlite_master WHERE name = 'pets'")[0]!
        .rootpage
    bytes.fill(0x5a, (rootPage - 1) * 4096, rootPage * 4096)
    writeFileSync(damaged, bytes)
    const foreign = join(folder.path, "other.db")
    const other = new (await import("bun:sqlite")).Database(foreign)
    other.run("CREATE TABLE things (id INTEGER PRIMARY KEY)")
    other.close()

    const cases: Array<[string, RegExp]> = [
      [
        text,
        new RegExp(
          `^restore: the backup SQLite database ${text} \\(it is not a SQLite database, or it is damaged\\): file is not a database$`
        )
      ],
      [
        damaged,
        new RegExp(
          `^restore: the backup (${damaged} failed its integrity check|SQLite database ${damaged} \\(it is not a SQLite database, or it is damaged\\))`
        )
      ],
      [
        foreign,
        new RegExp(`^restore: ${foreign} is not a backup of the Pet Store: it has no effect_sql_migrations table$`)
      ],
      [
        join(folder.path, "missing.db"),
        new RegExp(`^restore: the backup ${join(folder.path, "missing.db")}: no such file$`)
      ],
      [file, new RegExp(`^restore: ${file} is the database itself; name a backup made by db backup$`)]
    ]
    for (const [backup, line] of cases) {
      const refused = await db(["restore", "--ids-may-repeat", backup], { DATABASE_URL: file })
      expect(refused.exitCode, basename(backup)).toBe(1)
      expect(refused.stderr.split("\n"), basename(backup)).toHaveLength(2)
      expect(refused.stderr.trim(), basename(backup)).toMatch(line)
      expect(digest(file), basename(backup)).toBe(current)
      expect(leftovers(folder.path), basename(backup)).toEqual([])
    }
  })
})

/** A program of the PostgreSQL server's own install (pg_dump, pg_restore), to its end. */
const pgProgram = async (name: string, args: ReadonlyArray<string>) => {
  const proc = Bun.spawn([join(serverBin(), name), ...args], { stdout: "pipe", stderr: "pipe" })
  const [stderr, exitCode] = await Promise.all([new Response(proc.stderr).text(), proc.exited])
  if (exitCode !== 0) throw new Error(`${name} failed (exit ${exitCode}): ${stderr}`)
}

describe("a PostgreSQL restore from pg_dump, as docs/operations.md runs it", () => {
  it(
    "db last-id before the database is dropped, db restore-ids after pg_restore: the next id is above every id handed out",
    async () => {
      using folder = temporaryFolder()
      await using database = await createTestDatabase()
      const url = database.url
      const name = new URL(url).pathname.slice(1)
      const key = await createKey(url)
      const server = await startServer({ DATABASE_URL: url })
      let handedOut: Array<number>
      try {
        const before = await createPets(server.url, key, 3)
        const dump = join(folder.path, "petstore.dump")
        await pgProgram("pg_dump", ["--format=custom", `--file=${dump}`, url])
        const after = await createPets(server.url, key, 3)
        handedOut = [...before, ...after]
        // The highest id handed out has no row left: the sequence, not the rows, tells what was handed out.
        await pgQuery(url, "DELETE FROM pets WHERE id = $1", [Math.max(...handedOut)])
        await server.stop()

        // db restore is SQLite's; on PostgreSQL it points at these steps.
        const sqliteOnly = await db(["restore", dump], { DATABASE_URL: url })
        expect(sqliteOnly.exitCode).toBe(1)
        expect(sqliteOnly.stderr).toMatch(
          /^restore: .* is PostgreSQL; restore its pg_dump with pg_restore, then set its ids with db restore-ids/
        )

        const last = await db(["last-id"], { DATABASE_URL: url })
        expect(last.stderr).toBe("")
        expect(last.stdout).toBe(`${Math.max(...handedOut)}\n`)

        const cluster = await sharedPostgresUrl()
        await pgQuery(cluster, `DROP DATABASE ${name} WITH (FORCE)`)
        await pgQuery(cluster, `CREATE DATABASE ${name}`)
        await pgProgram("pg_restore", ["--no-owner", `--dbname=${url}`, dump])

        const set = await db(["restore-ids", "--above", last.stdout.trim()], { DATABASE_URL: url })
        expect(set.stderr).toBe("")
        expect(set.exitCode).toBe(0)
        // pg_dump's sequence is the backup's: without the step, the next pet would get id 4 again.
        expect(set.stdout).toMatch(/^next ids above 6 in .*: pets 7 \(was 4\), api_keys 7 \(was 2\)\n$/)
        const again = await db(["restore-ids", "--above", "3"], { DATABASE_URL: url })
        expect(again.stdout).toMatch(/: pets 7 \(already\), api_keys 7 \(already\)\n$/)
      } finally {
        await server.stop()
      }

      const restarted = await startServer({ DATABASE_URL: url })
      try {
        expect(await createPet(restarted.url, key, "after the restore")).toBeGreaterThan(Math.max(...handedOut))
      } finally {
        await restarted.stop()
      }
    },
    60_000
  )
})
