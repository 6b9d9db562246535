import { readFileSync, statSync } from "node:fs"
import { homedir } from "node:os"
import { join } from "node:path"

/**
 * The login a `postgres://` URL leaves to libpq's environment, found as `psql` finds it (`PGUSER`,
 * `PGPASSWORD`, the password file unless others may read it): the documented way to keep a
 * password off a `db` command line, which `@effect/sql-pg` does not read.
 */
export interface Login {
  readonly username: string | undefined
  readonly password: string | undefined
}

export const libpqLogin = (databaseUrl: string): Login => {
  const url = new URL(databaseUrl)
  const pgUser = nonEmpty(process.env["PGUSER"])
  const username = url.username === "" ? pgUser : undefined
  if (url.password !== "") return { username, password: undefined }
  const password = nonEmpty(process.env["PGPASSWORD"]) ?? fromPasswordFile({
    host: url.hostname === "" ? "localhost" : url.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: url.port === "" ? "5432" : url.port,
    user: decode(url.username) || pgUser || process.env["USER"] || "",
    database: decode(url.pathname.slice(1))
  })
  return { username, password }
}

const nonEmpty = (value: string | undefined) => (value === undefined || value === "" ? undefined : value)

/** A URL part percent-decoded, or as it is when it does not decode. */
export const decode = (text: string) => {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/** A line's fields, split at colons that no backslash escapes. */
const fieldsOf = (line: string): Array<string> => {
  const fields = [""]
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!
    if (c === "\\" && i + 1 < line.length) fields[fields.length - 1] += line[++i]
    else if (c === ":") fields.push("")
    else fields[fields.length - 1] += c
  }
  return fields
}

const fromPasswordFile = (
  wanted: { host: string; port: string; user: string; database: string }
): string | undefined => {
  const file = nonEmpty(process.env["PGPASSFILE"]) ?? join(homedir(), ".pgpass")
  let text: string
  try {
    const stat = statSync(file)
    if (!stat.isFile() || (stat.mode & 0o077) !== 0) return undefined
    text = readFileSync(file, "utf8")
  } catch {
    return undefined
  }
  const database = wanted.database || wanted.user
  const expected = [wanted.host, wanted.port, database, wanted.user]
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === "" || line.startsWith("#")) continue
    const fields = fieldsOf(line)
    if (fields.length < 5) continue
    if (expected.every((value, i) => fields[i] === "*" || fields[i] === value)) return fields.slice(4).join(":")
  }
  return undefined
}
