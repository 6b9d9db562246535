import { describe, expect, it } from "@effect/vitest"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import packageJson from "../package.json" with { type: "json" }

const root = new URL("..", import.meta.url).pathname

describe("packaging", () => {
  it("gives the client and the API definition their own entry points", () => {
    expect(packageJson.exports).toEqual({ "./client": "./src/client.ts", "./api": "./src/Api.ts" })
  })

  it("the client bundles for browsers without server code, bun:sqlite, @effect/sql* or @effect/platform-bun", async () => {
    const out = mkdtempSync(join(tmpdir(), "petstore-bundle-"))
    try {
      const build = Bun.spawnSync(
        ["bun", "build", "src/client.ts", "--target=browser", "--sourcemap=external", "--outdir", out],
        { cwd: root }
      )
      expect(build.exitCode, build.stderr.toString()).toBe(0)
      const sources: Array<string> = JSON.parse(readFileSync(join(out, "client.js.map"), "utf8")).sources
      expect(sources.some((source) => source.includes("src/Client/PetStoreClient.ts"))).toBe(true)
      const forbidden = sources.filter((source) =>
        /bun:sqlite|@effect\/sql|@effect\/platform-bun|src\/(Http|Sql|Auth\/Http|Pets\/Http|Health\/Http|main|keys)/.test(source)
      )
      expect(forbidden).toEqual([])
      expect(readFileSync(join(out, "client.js"), "utf8")).not.toContain("bun:sqlite")
    } finally {
      rmSync(out, { recursive: true, force: true })
    }
  })
})
