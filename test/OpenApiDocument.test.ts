import { describe, expect, it } from "@effect/vitest"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"

const root = new URL("..", import.meta.url).pathname
type Json = Record<string, any>

/** The document the real server serves, and a key for it. */
const withServer = async (f: (server: { url: string; key: string; spec: Json }) => Promise<void>) => {
  using folder = temporaryFolder()
  const env = { DATABASE_URL: join(folder.path, "petstore.db") }
  const key = (await runCommand(["src/bin/keys.ts", "create", "--name", "openapi"], env)).stdout.trim().split("\n").at(
    -1
  )!
  const server = await startServer(env)
  try {
    const spec = await (await fetch(`${server.url}/v1/openapi.json`)).json()
    await f({ url: server.url, key, spec })
  } finally {
    await server.stop()
  }
}

const operations = (spec: Json) =>
  Object.entries<Json>(spec.paths).flatMap(([path, methods]) =>
    Object.entries<Json>(methods).map(([method, operation]) => ({ name: `${method.toUpperCase()} ${path}`, operation }))
  )

describe("the OpenAPI document", () => {
  it("describes every operation, property and header a client meets, and passes redocly lint", async () => {
    await withServer(async ({ spec }) => {
      for (const { name, operation } of operations(spec)) {
        expect(operation.summary, name).toBeTruthy()
        expect(operation.description, name).toBeTruthy()
        for (const [status, response] of Object.entries<Json>(operation.responses)) {
          expect(response.headers?.["X-Request-Id"], `${name} ${status}`).toBeDefined()
          if (status === "401") expect(response.headers["WWW-Authenticate"], name).toBeDefined()
          if (Number(status) >= 400) {
            const schema = response.content["application/json"].schema
            const ref: string = schema.$ref ?? schema.allOf?.[0]?.$ref
            const body = spec.components.schemas[ref.split("/").at(-1)!]
            expect(Object.keys(body.properties), `${name} ${status}`).toEqual(["code", "message", "status"])
            expect(body.properties.code.enum.length, `${name} ${status}`).toBeGreaterThan(0)
          }
        }
      }
      const get = (path: string, method: string) => spec.paths[path][method]
      expect(get("/v1/pets", "get").responses["200"].headers.Link).toBeDefined()
      expect(get("/v1/pets", "post").responses["201"].headers.Location).toBeDefined()
      for (const response of Object.values<Json>(get("/v1/pets/{petId}", "get").responses)) {
        expect(Object.keys(response.headers)).toEqual(expect.arrayContaining(["Deprecation", "Sunset", "Link"]))
      }

      const missing: Array<string> = []
      const visit = (schema: Json, where: string) => {
        for (const [name, property] of Object.entries<Json>(schema.properties ?? {})) {
          const target = property.$ref
            ? { ...spec.components.schemas[property.$ref.split("/").at(-1)], ...property }
            : property
          if (!target.description || !(target.examples ?? target.example)) missing.push(`${where}.${name}`)
        }
      }
      for (const [name, schema] of Object.entries<Json>(spec.components.schemas)) visit(schema, name)
      for (const { name, operation } of operations(spec)) {
        for (const response of Object.values<Json>(operation.responses)) {
          const schema = response.content?.["application/json"]?.schema
          if (schema?.properties) visit(schema, name)
        }
      }
      expect(missing).toEqual([])

      const folder = mkdtempSync(join(root, "test/.openapi-"))
      try {
        writeFileSync(join(folder, "openapi.json"), JSON.stringify(spec))
        const lint = Bun.spawnSync(
          ["node_modules/.bin/redocly", "lint", "--extends=recommended", join(folder, "openapi.json")],
          { cwd: root, env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" } }
        )
        expect(lint.exitCode, lint.stdout.toString() + lint.stderr.toString()).toBe(0)
      } finally {
        rmSync(folder, { recursive: true, force: true })
      }
    })
  })

  it("serves a program that knows nothing of Effect: openapi-typescript types and an openapi-fetch script", async () => {
    await withServer(async ({ key, url }) => {
      const folder = mkdtempSync(join(root, "test/.openapi-"))
      try {
        const generate = Bun.spawnSync(
          ["node_modules/.bin/openapi-typescript", `${url}/v1/openapi.json`, "-o", join(folder, "petstore.d.ts")],
          { cwd: root }
        )
        expect(generate.exitCode, generate.stderr.toString()).toBe(0)
        writeFileSync(
          join(folder, "script.ts"),
          `import createClient from "openapi-fetch"
import type { paths } from "./petstore.js"

const client = createClient<paths>({ baseUrl: process.env.BASE_URL!, headers: { Authorization: \`Bearer \${process.env.API_KEY}\` } })
const created = await client.POST("/v1/pets", { body: { name: "Rex", categoryId: 3, status: "sold" } })
if (created.error || created.response.status !== 201) throw new Error("create failed")
const listed = await client.GET("/v1/pets", { params: { query: { status: "sold", limit: 10 } } })
const fetched = await client.GET("/v1/pets/{petId}", { params: { path: { petId: created.data.id } } })
const missing = await client.GET("/v1/pets/{petId}", { params: { path: { petId: 999 } } })
console.log(JSON.stringify({ created: created.data, listed: listed.data, fetched: fetched.data, missing: missing.error }))
`
        )
        const typecheck = Bun.spawnSync([
          "node_modules/.bin/tsc",
          "--noEmit",
          "--strict",
          "--skipLibCheck",
          "--target",
          "es2022",
          "--module",
          "esnext",
          "--moduleResolution",
          "bundler",
          "--types",
          "bun",
          join(folder, "script.ts")
        ], { cwd: root })
        expect(typecheck.exitCode, typecheck.stdout.toString()).toBe(0)
        const run = Bun.spawnSync(["bun", join(folder, "script.ts")], {
          cwd: root,
          env: { ...process.env, BASE_URL: url, API_KEY: key }
        })
        expect(run.exitCode, run.stderr.toString()).toBe(0)
        const pet = { id: 1, name: "Rex", categoryId: 3, status: "sold" }
        expect(JSON.parse(run.stdout.toString())).toEqual({
          created: pet,
          listed: [pet],
          fetched: pet,
          missing: { code: "pet_not_found", message: "petId: no animal has id 999", status: 404 }
        })
      } finally {
        rmSync(folder, { recursive: true, force: true })
      }
    })
  })
})
