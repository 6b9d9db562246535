import { Database } from "bun:sqlite"
import Pg from "pg"
import { runCommand } from "./ServerProcess.js"

/** `npm run db -- …`: its output, error output and exit code. */
export const db = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  runCommand(["src/bin/db.ts", ...args], env)

/** Creates an API key in the database `databaseUrl` names; the key. */
export const createKey = async (databaseUrl: string, name = "move test") => {
  const result = await runCommand(["src/bin/keys.ts", "create", "--name", name], { DATABASE_URL: databaseUrl })
  if (result.exitCode !== 0) throw new Error(result.stderr)
  return result.stdout.trim().split("\n").at(-1)!
}

/** One query on a PostgreSQL database, on a connection of its own. */
export const pgQuery = async <A = Record<string, unknown>>(url: string, text: string, params: Array<unknown> = []) => {
  const client = new Pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query(text, params)).rows as Array<A>
  } finally {
    await client.end()
  }
}

/** One query on a SQLite file, opened read-only. */
export const sqliteQuery = <A = Record<string, unknown>>(file: string, text: string) => {
  const sqlite = new Database(file, { readonly: true })
  try {
    return sqlite.query(text).all() as Array<A>
  } finally {
    sqlite.close()
  }
}

/** Every row of the tables a move copies, in key order, as the SQLite file holds them. */
export const sqliteRows = (file: string) =>
  Object.fromEntries(
    [
      ["pets", "SELECT * FROM pets ORDER BY id"],
      ["api_keys", "SELECT * FROM api_keys ORDER BY id"],
      ["settings", "SELECT * FROM settings WHERE name <> 'read_only' ORDER BY name"],
      ["idempotency_keys", "SELECT * FROM idempotency_keys ORDER BY api_key_id, idempotency_key"],
      ["sqlite_sequence", "SELECT * FROM sqlite_sequence ORDER BY name"]
    ].map(([table, query]) => [table, sqliteQuery(file, query!)])
  )

/** Whether the text shows any of the secrets. */
export const shows = (text: string, ...secrets: ReadonlyArray<string>) =>
  secrets.some((secret) => text.includes(secret))
