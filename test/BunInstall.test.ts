import { afterEach, describe, expect, it } from "@effect/vitest"
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs"
import { delimiter, join } from "node:path"
import { temporaryFolder } from "./support/ServerProcess.js"

const root = new URL("..", import.meta.url).pathname

/**
 * What a test left when its time ran out (an install still waiting on its registry): the install's
 * process group and its folder, ended after each test.
 */
const leftBehind = new Set<{ readonly pid: number; readonly folder: Disposable }>()
afterEach(() => {
  for (const { folder, pid } of leftBehind) {
    try {
      process.kill(-pid, "SIGKILL")
    } catch {
      // already gone
    }
    folder[Symbol.dispose]()
  }
  leftBehind.clear()
})

/** A registry (or proxy) on 127.0.0.1 that notes each request and answers as `answer` says. */
const fakeRegistry = (answer: (attempt: number) => Response | Promise<Response>) => {
  const requests: Array<{ readonly url: string; readonly authorization: string | null }> = []
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    // Bun would close a hung request's connection after 10 s: a registry that hangs keeps it.
    idleTimeout: 0,
    fetch: (request) => {
      requests.push({ url: request.url, authorization: request.headers.get("authorization") })
      return answer(requests.length)
    }
  })
  return { url: `http://127.0.0.1:${server.port}/`, requests, [Symbol.dispose]: () => server.stop(true) }
}

/**
 * `scripts/with-bun.sh` copied into a folder of its own (so the install goes to that folder's
 * `.tools/`) and run where Bun is not on PATH, under a machine whose npm configuration is only
 * the files given: the global one (under npm's prefix), the user's and the project's.
 */
const installBun = async (npmrc: { readonly global: string; readonly user: string; readonly project: string }) => {
  const machine = temporaryFolder()
  const project = join(machine.path, "project")
  mkdirSync(join(project, "scripts"), { recursive: true })
  for (const script of ["with-bun.sh", "install-bun.sh"]) {
    copyFileSync(join(root, "scripts", script), join(project, "scripts", script))
  }
  mkdirSync(join(machine.path, "npm", "etc"), { recursive: true })
  writeFileSync(join(machine.path, "npm", "etc", "npmrc"), npmrc.global)
  writeFileSync(join(machine.path, "user.npmrc"), npmrc.user)
  writeFileSync(join(project, ".npmrc"), npmrc.project)
  const path = (process.env.PATH ?? "").split(delimiter).filter((folder) => folder !== "" && !existsSync(join(folder, "bun")))
  const startedAt = performance.now()
  const proc = Bun.spawn(["sh", "scripts/with-bun.sh", "true"], {
    cwd: project,
    // Nothing of this machine's npm settings (nor npm's own, when the tests run under npm test).
    env: {
      PATH: path.join(delimiter),
      HOME: machine.path,
      NPM_CONFIG_PREFIX: join(machine.path, "npm"),
      NPM_CONFIG_USERCONFIG: join(machine.path, "user.npmrc")
    },
    stdout: "pipe",
    stderr: "pipe",
    // Its own process group, so that npm below it can be ended with it.
    detached: true
  })
  const run = { pid: proc.pid, folder: machine }
  leftBehind.add(run)
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  const installed = existsSync(join(project, ".tools", "node_modules", ".bin", "bun"))
  leftBehind.delete(run)
  machine[Symbol.dispose]()
  return { exitCode, stdout, stderr, seconds: (performance.now() - startedAt) / 1000, installed }
}

const failureLine = (registry: string) => `Could not install Bun 1.4.5 from the npm registry ${registry} (npm's reason is above).`

describe("installing Bun where it is missing (scripts/with-bun.sh)", () => {
  it("reads the global, the user's and the project's npmrc, as npm run in the project does, and names the registry that failed", async () => {
    using proxy = fakeRegistry(() => new Response("down for maintenance", { status: 500 }))
    const result = await installBun({
      global: "registry=http://registry.invalid/\n",
      user: `proxy=${proxy.url}\nfetch-retries=0\n`,
      project: "//registry.invalid/:_authToken=from-the-project\n"
    })
    // The registry from the global file, through the proxy from the user's, with the project's token,
    // tried once as the user's file asks.
    expect(proxy.requests).toEqual([{ url: "http://registry.invalid/bun", authorization: "Bearer from-the-project" }])
    expect(result.exitCode).toBe(1)
    expect(result.stderr).toContain("npm error 500 Internal Server Error - GET http://registry.invalid/bun")
    expect(result.stderr).toContain(failureLine("http://registry.invalid/"))
    expect(result.stdout).toBe("")
    expect(result.installed).toBe(false)
  }, 30_000)

  it("a registry that stops answering: npm's reason and the registry are told within the minute", async () => {
    // The first request fails at once and the retry hangs: npm's own bounds would wait 5 minutes.
    using registry = fakeRegistry((attempt) => attempt === 1 ? new Response("", { status: 503 }) : new Promise(() => {}))
    const result = await installBun({ global: "", user: "", project: `registry=${registry.url}\n` })
    expect(result.exitCode).toBe(1)
    expect(result.seconds).toBeLessThan(60)
    expect(registry.requests.map(({ url }) => url)).toEqual([`${registry.url}bun`, `${registry.url}bun`])
    expect(result.stderr).toContain(`npm error network timeout at: ${registry.url}bun`)
    expect(result.stderr).toContain(failureLine(registry.url))
    expect(result.installed).toBe(false)
  }, 60_000)
})
