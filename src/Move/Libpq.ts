import { readFileSync, statSync } from "node:fs"
import { homedir } from "node:os"
import { join } from "node:path"
import { decode } from "../Sql/PostgresConnection.js"

const env = (name: string) => process.env[name] || undefined

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

/** The password file's password for a URL that gives none, as `psql` finds it: `pg` reads it only with a warning. */
export const passwordFileLogin = (databaseUrl: string): string | undefined => {
  const url = new URL(databaseUrl)
  if (url.password !== "" || env("PGPASSWORD") !== undefined) return undefined
  let text: string
  try {
    const file = env("PGPASSFILE") ?? join(homedir(), ".pgpass")
    const stat = statSync(file)
    if (!stat.isFile() || (stat.mode & 0o077) !== 0) return undefined
    text = readFileSync(file, "utf8")
  } catch {
    return undefined
  }
  const user = decode(url.username) || env("PGUSER") || env("USER") || ""
  const wanted = [
    url.hostname === "" ? "localhost" : url.hostname.replace(/^\[(.*)\]$/, "$1"),
    url.port === "" ? "5432" : url.port,
    decode(url.pathname.slice(1)) || user,
    user
  ]
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === "" || line.startsWith("#")) continue
    const fields = fieldsOf(line)
    if (fields.length >= 5 && wanted.every((value, i) => fields[i] === "*" || fields[i] === value)) {
      return fields.slice(4).join(":")
    }
  }
  return undefined
}
