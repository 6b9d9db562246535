import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { join, relative } from "node:path"
import { Readiness } from "../src/Api/Health.js"
import * as ApiErrors from "../src/Domain/ApiError.js"

const root = join(import.meta.dirname, "..")
const read = (path: string) => readFileSync(join(root, path), "utf8")
const pages = [
  "README.md",
  ...readdirSync(join(root, "docs")).filter((name) => name.endsWith(".md")).sort().map((name) => `docs/${name}`)
]

/** Every file under `folder` whose name ends with one of `extensions`, as [path, text]. */
const filesUnder = (folder: string, extensions: ReadonlyArray<string>): ReadonlyArray<readonly [string, string]> =>
  readdirSync(join(root, folder), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && extensions.some((extension) => entry.name.endsWith(extension)))
    .map((entry) => join(entry.parentPath, entry.name))
    .map((path) => [relative(root, path), readFileSync(path, "utf8")] as const)

/** A page without its fenced blocks, which hold commands and files rather than what the page states. */
const prose = (markdown: string) => markdown.replace(/^```[^\n]*\n[\s\S]*?^```[ \t]*$/gm, "")

const inlineCode = (markdown: string) => [...prose(markdown).matchAll(/`([^`]+)`/g)].map((match) => match[1]!)

// ---------------------------------------------------------------------------------------------
// Settings

const variableName = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$/

/** The variables a page names in its inline code: a span that is a name, or that sets one (`NAME=…`, `NAME=1 npm test`). */
const variablesNamedIn = (markdown: string) =>
  inlineCode(markdown).flatMap((span) => {
    const whole = span.trim()
    if (variableName.test(whole)) return [{ name: whole, assigned: false }]
    return [...whole.matchAll(/(?:^|\s)([A-Z][A-Z0-9_]*)=/g)].map((match) => ({ name: match[1]!, assigned: true }))
  })

/** configuration.md's tables: each variable of a row's first cell, with the section it is listed under. */
const listed = (() => {
  const byName = new Map<string, string>()
  let section = ""
  for (const line of read("docs/configuration.md").split("\n")) {
    if (line.startsWith("## ")) section = line.slice(3).trim()
    const firstCell = /^\|([^|]*)\|/.exec(line)?.[1]
    if (firstCell === undefined) continue
    for (const [, name] of firstCell.matchAll(/`([^`]+)`/g)) if (variableName.test(name!)) byName.set(name!, section)
  }
  return byName
})()

/** The section of configuration.md whose variables only the tests read. */
const testsSection = "For the tests"

/** How a file reads a variable: as a string (`Config.String("PORT")`, `process.env["PGUSER"]`), or a shell's `$NAME`. */
const reads = (path: string, text: string, name: string) =>
  new RegExp(path.endsWith(".sh") ? `\\$\\{?${name}\\b` : `["']${name}["']|process\\.env\\.${name}\\b`).test(text)

const service = [...filesUnder("src", [".ts"]), ...filesUnder("scripts", [".ts", ".sh"])]
const tests = filesUnder("test", [".ts"])

/**
 * Library code that reads variables for the service: the OTLP resource's (`OTEL_SERVICE_NAME`,
 * `OTEL_SERVICE_VERSION`, `OTEL_RESOURCE_ATTRIBUTES`) is read by `effect/observability` when the
 * service calls it, so it counts only while src/ calls it.
 */
const libraryReaders = service.some(([, text]) => text.includes("OtlpResource.fromConfig("))
  ? [["effect/observability's OtlpResource", read("node_modules/effect/src/observability/OtlpResource.ts")] as const]
  : []

const readersOf = (name: string, files: ReadonlyArray<readonly [string, string]>) =>
  files.filter(([path, text]) => reads(path, text, name)).map(([path]) => path)

/** Read by the balancer's configuration (`"${NAME-default}"`), not by the service. */
const haproxyVariables = new Set(
  [...read("deploy/haproxy/haproxy.cfg").matchAll(/\$\{([A-Z][A-Z0-9_]*)/g)].map((match) => match[1]!)
)

/** Constants the build writes into the executable (`declare const NAME` in src/, `define` in scripts/build.ts), not variables. */
const buildConstants = new Set(
  service.flatMap(([, text]) => [...text.matchAll(/^declare const ([A-Z][A-Z0-9_]*)\b/gm)].map((match) => match[1]!))
)

/** The operator's own variables, whose names the pages' `db` commands are given (`--to-env NEW_DATABASE_URL`), not settings of the service. */
const namedToDb = new Set(
  pages.flatMap((page) =>
    [...read(page).matchAll(/npm run db -- .*?--(?:from|to)-env ([A-Z][A-Z0-9_]*)/g)].map((match) => match[1]!)
  )
)

/** Names the pages write in capitals with underscores that are not settings of the service, and why. */
const notSettings: Record<string, string> = {
  AF_INET: "a socket address family (systemd's RestrictAddressFamilies)",
  AF_INET6: "a socket address family (systemd's RestrictAddressFamilies)",
  AF_UNIX: "a socket address family (systemd's RestrictAddressFamilies)",
  SO_REUSEPORT: "a socket option the workers share the port with",
  NPM_CONFIG_USERCONFIG:
    "npm's own: where it finds the user's configuration, which the install of Bun reads as npm does",
  OTEL_EXPORTER_OTLP_PROTOCOL:
    "named only to say that it is not read: exports are OTLP/HTTP with JSON bodies whatever it says"
}

/** Every setting a page names: a name with an underscore, one it assigns, or one configuration.md lists. */
const settingsNamed = pages.flatMap((page) =>
  variablesNamedIn(read(page))
    .filter(({ assigned, name }) => assigned || name.includes("_") || listed.has(name))
    .map(({ name }) => ({ page, name }))
)

const isOurs = (name: string) =>
  !(name in notSettings) && !haproxyVariables.has(name) && !buildConstants.has(name) && !namedToDb.has(name)

describe("the docs name the settings the service reads", () => {
  it("finds the settings the pages name, and the tables of configuration.md", () => {
    expect(listed.get("PORT")).toBe("The server")
    expect(listed.get("DB_STATEMENT_TIMEOUT_SECONDS")).toBe("The db command")
    expect(settingsNamed).toContainEqual({ page: "README.md", name: "PETSTORE_BASE_URL" })
    expect(variablesNamedIn("`UPDATE_OPENAPI_FIXTURE=1 npm test`, `WORKERS`, `SELECT`, `DATABASE_URL=$NEW`")).toEqual([
      { name: "UPDATE_OPENAPI_FIXTURE", assigned: true },
      { name: "WORKERS", assigned: false },
      { name: "SELECT", assigned: false },
      { name: "DATABASE_URL", assigned: true }
    ])
    expect([...haproxyVariables]).toContain("PETSTORE_1")
    expect([...buildConstants]).toEqual(["PETSTORE_BUILD"])
    expect([...namedToDb]).toEqual(["NEW_DATABASE_URL"])
  })

  it("every setting a page names is listed in configuration.md", () => {
    const unlisted = settingsNamed.filter(({ name }) => isOurs(name) && !listed.has(name))
    expect(unlisted, "named in the docs, missing from docs/configuration.md's tables").toEqual([])
  })

  it("every setting configuration.md lists is read by the service or one of its commands (the tests' by the tests)", () => {
    const unread = [...listed].filter(([name, section]) =>
      section === testsSection
        ? readersOf(name, tests).length === 0
        : readersOf(name, service).length === 0 && readersOf(name, libraryReaders).length === 0
    ).map(([name]) => name)
    expect(unread, "listed in docs/configuration.md, read by nothing in src/ or scripts/").toEqual([])
  })

  it("the names let through are still named by a page, and not read by the service", () => {
    const named = new Set(settingsNamed.map(({ name }) => name))
    for (const name of [...Object.keys(notSettings), ...haproxyVariables, ...namedToDb]) {
      expect(readersOf(name, service), `${name} is read by the service: list it in docs/configuration.md`).toEqual([])
    }
    for (const name of Object.keys(notSettings)) {
      expect(named.has(name), `${name} is named by no page: drop it`).toBe(true)
    }
  })
})

// ---------------------------------------------------------------------------------------------
// Error codes and Retry-After

/** Each tagged error of the interface: its HTTP status and the codes its schema declares. */
const declared = new Map<number, ReadonlyArray<string>>(
  Object.values(ApiErrors).flatMap((value) => {
    const fields = (value as { fields?: { code?: unknown; status?: { literal?: unknown } } }).fields
    return typeof value === "function" && fields?.code !== undefined && typeof fields.status?.literal === "number"
      ? [[fields.status.literal, ApiErrors.codesOf(value as never)] as const]
      : []
  })
)

const codeName = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$/

/** api.md's error table: the codes of each status's row. */
const errorTable = (() => {
  const section = read("docs/api.md").split(/^## /m).find((part) => part.startsWith("Errors\n"))!
  return new Map(
    [...section.matchAll(/^\| (\d{3}) \| (.*) \|$/gm)].map((
      row
    ) => [Number(row[1]), inlineCode(row[2]!).filter((span) => codeName.test(span))])
  )
})()

const serviceUnavailableCodes = ApiErrors.codesOf(ApiErrors.ServiceUnavailable)

interface RetryAfterStatement {
  readonly page: string
  readonly code: string
  readonly seconds: number
  readonly text: string
}

/**
 * The `Retry-After` values a page states, each tied to its 503 code: within a table cell or a
 * sentence, a value is that of the codes named since the previous value (`503 \`read_only\` and
 * \`Retry-After: 10\``), `\`code\`: N` states one code's, and a value with no code before it is that
 * of every code the sentence does not give another (`Retry-After: 1` (`read_only`: 10)).
 */
const retryAfterStatements = (page: string, markdown: string): ReadonlyArray<RetryAfterStatement> =>
  prose(markdown)
    .split(/\n\s*\n|\n(?=\s*(?:[-*]|\d+\.)\s)/)
    .flatMap((block) => block.replace(/\s*\n\s*/g, " ").split(/ \| |(?<=\.) (?=[A-Z`])/))
    .flatMap((text) => {
      const found: Array<RetryAfterStatement> = []
      const defaults: Array<number> = []
      let pending: Array<string> = []
      const tokens = /`([a-z_]+)`(?::\s*(\d+))?|Retry-After:\s*(\d+)/g
      for (const match of text.matchAll(tokens)) {
        const [, code, own, value] = match
        if (value !== undefined) {
          if (pending.length === 0) defaults.push(Number(value))
          for (const each of pending) found.push({ page, code: each, seconds: Number(value), text })
          pending = []
        } else if (serviceUnavailableCodes.includes(code as never)) {
          if (own === undefined) pending.push(code!)
          else found.push({ page, code: code!, seconds: Number(own), text })
        }
      }
      const stated = new Set(found.map(({ code }) => code))
      for (const seconds of defaults) {
        for (const code of serviceUnavailableCodes) if (!stated.has(code)) found.push({ page, code, seconds, text })
      }
      return found
    })

describe("the docs promise the codes and Retry-After the service sends", () => {
  it("api.md's error table lists exactly the codes the interface declares, under their statuses", () => {
    expect(declared.get(503)).toContain("read_only")
    const sorted = (table: ReadonlyMap<number, ReadonlyArray<string>>) =>
      Object.fromEntries(
        [...table].map(([status, codes]) => [status, [...codes].sort()]).sort(([a], [b]) => Number(a) - Number(b))
      )
    expect(sorted(errorTable)).toEqual(sorted(declared))
  })

  it("every code a page gives a status (`503 \\`database_unavailable\\``) is declared under that status", () => {
    const wrong = pages.flatMap((page) =>
      [...prose(read(page)).matchAll(/\b([45]\d\d) `([a-z][a-z0-9_]*)`/g)]
        .filter(([, status, code]) => !(declared.get(Number(status)) ?? []).includes(code!))
        .map(([text]) => `${page}: ${text}`)
    )
    expect(wrong).toEqual([])
  })

  it("ties each Retry-After value to its code", () => {
    const codes = (text: string) => retryAfterStatements("page", text).map(({ code, seconds }) => `${code} ${seconds}`)
    expect(codes("Creates 503 `database_read_only` with `Retry-After: 5`; reads 200.")).toEqual([
      "database_read_only 5"
    ])
    expect(codes("`database_unavailable` or `request_timeout`, each with `Retry-After: 1`")).toEqual([
      "database_unavailable 1",
      "request_timeout 1"
    ])
    expect(codes("Every 503 has `Retry-After: 1` (`database_read_only`: 5, a move's `read_only`: 10).")).toEqual([
      "database_read_only 5",
      "read_only 10",
      "database_unavailable 1",
      "request_timeout 1",
      "shutting_down 1"
    ])
    expect(codes("`read_only` (writes stopped). Answers carry `Retry-After: 3`.")).toHaveLength(
      serviceUnavailableCodes.length
    )
  })

  it("api.md's 503 row states the Retry-After of every 503 code", () => {
    const row = /^\| 503 \| .* \|$/m.exec(read("docs/api.md"))![0]
    const stated = retryAfterStatements("docs/api.md", row).map(({ code }) => code)
    expect([...new Set(stated)].sort()).toEqual([...serviceUnavailableCodes].sort())
  })

  it("every Retry-After a page states for a 503 is the one the service sends", () => {
    const statements = pages.flatMap((page) => retryAfterStatements(page, read(page)))
    expect(statements.length).toBeGreaterThan(serviceUnavailableCodes.length)
    const wrong = statements
      .filter(({ code, seconds }) =>
        ApiErrors.retryAfterSeconds[code as keyof typeof ApiErrors.retryAfterSeconds] !== seconds
      )
      .map(({ code, page, seconds, text }) =>
        `${page}: ${code} with Retry-After ${seconds}, where the service sends ${
          ApiErrors.retryAfterSeconds[code as keyof typeof ApiErrors.retryAfterSeconds]
        } (in "${text.slice(0, 160)}")`
      )
    expect(wrong).toEqual([])
  })
})

// ---------------------------------------------------------------------------------------------
// /readyz

describe("the docs describe /readyz as it answers", () => {
  it("names the database's states its body may carry, and no other", () => {
    const states = [...Readiness.fields.database.literals].sort()
    const readiness = read("docs/operations.md").split(/^## /m).find((part) => part.startsWith("Readiness\n"))!
    const documented = new Set([...readiness.matchAll(/"database":"([a-z_]+)"/g)].map((match) => match[1]!))
    expect([...documented].sort()).toEqual(states)
    const api = /naming it in `database`: ([^;)]*)/.exec(read("docs/api.md"))?.[1] ?? ""
    expect(inlineCode(api).sort()).toEqual(states)
  })
})
