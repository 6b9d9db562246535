import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { builtFolder } from "./support/Build.js"
import { freePort, temporaryFolder } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

describe("the production build", () => {
  it("starts without a warning: its first output is the listening line", async () => {
    using folder = temporaryFolder()
    // The run's shared build (scripts/build.ts), made by the first test file that asks.
    const outdir = await builtFolder()
    // Bun's bytecode beside the bundle: Bun leaves it out without a word when the bundle is not valid
    // CommonJS. And the executable, test/Executable.test.ts's subject.
    expect(readdirSync(outdir).sort()).toEqual(["main.js", "main.js.jsc", "petstore"])
    // Scalar's script, embedded by effect/http-api, ends with its CDN's source map URL: the build drops it.
    expect(readFileSync(join(outdir, "main.js"), "utf8")).not.toContain("sourceMappingURL=/sm/")

    const port = freePort()
    const proc = Bun.spawn(["bun", join(outdir, "main.js")], {
      cwd: folder.path,
      env: {
        ...process.env,
        HOST: "127.0.0.1",
        PORT: String(port),
        DATABASE_URL: join(folder.path, "petstore.db"),
        METRICS_PORT: "off"
      },
      stdout: "pipe",
      stderr: "pipe"
    })
    try {
      await waitFor(async () => {
        if (proc.exitCode !== null) throw new Error("it exited")
        return fetch(`http://127.0.0.1:${port}/livez`).then((r) => r.ok, () => false)
      }, { what: "the built server answering /livez" }).catch(async (error: Error) => {
        proc.kill("SIGKILL")
        throw new Error(
          `the built server did not start (${error.message}): ${await new Response(proc.stdout)
            .text()}${await new Response(
            proc.stderr
          ).text()}`
        )
      })
      // The page the bundle serves is Scalar's, and carries no source map URL either.
      const docs = await fetch(`http://127.0.0.1:${port}/docs`)
      expect(docs.status).toBe(200)
      const page = await docs.text()
      expect(page).toContain("createApiReference")
      expect(page).not.toContain("sourceMappingURL")
    } finally {
      proc.kill("SIGTERM")
      await proc.exited
    }
    const stderr = await new Response(proc.stderr).text()
    const stdout = await new Response(proc.stdout).text()
    expect(stderr).toBe("")
    expect(stdout.split("\n")[0]).toContain(`"message":"listening"`)
    expect(stdout).not.toMatch(/sourcemap/i)
  }, 120_000)
})
