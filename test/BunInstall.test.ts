import { afterEach, describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { delimiter, join } from "node:path"
import { temporaryFolder } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

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
 * A fresh checkout on a machine without Bun: `scripts/with-bun.sh` copied into a folder of its own
 * (so the install goes to that folder's `.tools/`), under an npm configuration that is only the
 * files given: the global one (under npm's prefix), the user's and the project's.
 */
const freshCheckout = (npmrc: { readonly global: string; readonly user: string; readonly project: string }) => {
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
  const path = (process.env.PATH ?? "").split(delimiter).filter((folder) =>
    folder !== "" && !existsSync(join(folder, "bun"))
  )
  /** `sh scripts/with-bun.sh …args` started in the checkout; what it wrote is read as it comes. */
  const start = (args: ReadonlyArray<string>) => {
    const startedAt = performance.now()
    const proc = Bun.spawn(["sh", "scripts/with-bun.sh", ...args], {
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
    const stderr = { text: "" }
    const stderrRead = (async () => {
      const decoder = new TextDecoder()
      const reader = proc.stderr.getReader()
      for (let read = await reader.read(); !read.done; read = await reader.read()) {
        stderr.text += decoder.decode(read.value, { stream: true })
      }
    })()
    const finished = Promise.all([new Response(proc.stdout).text(), proc.exited, stderrRead]).then(
      ([stdout, exitCode]) => {
        leftBehind.delete(run)
        return { exitCode, stdout, stderr: stderr.text, seconds: (performance.now() - startedAt) / 1000 }
      }
    )
    return { stderr, finished }
  }
  const installed = () => existsSync(join(project, ".tools", "node_modules", ".bin", "bun"))
  return { project, start, installed, [Symbol.dispose]: () => machine[Symbol.dispose]() }
}

/** `scripts/with-bun.sh true` run on a fresh checkout, to its end. */
const installBun = async (npmrc: { readonly global: string; readonly user: string; readonly project: string }) => {
  using checkout = freshCheckout(npmrc)
  const result = await checkout.start(["true"]).finished
  return { ...result, installed: checkout.installed() }
}

/**
 * The npm package `bun` as a registry serves it, in its place a script: `--version` says 1.4.5,
 * `install` makes `node_modules` and notes each run in `installs.log`.
 */
const fakeBunPackage = () => {
  using folder = temporaryFolder()
  const packageFolder = join(folder.path, "package")
  mkdirSync(join(packageFolder, "bin"), { recursive: true })
  writeFileSync(
    join(packageFolder, "package.json"),
    JSON.stringify({ name: "bun", version: "1.4.5", bin: { bun: "bin/bun" } })
  )
  writeFileSync(
    join(packageFolder, "bin", "bun"),
    `#!/bin/sh\ncase "$1" in\n  --version) echo 1.4.5 ;;\n  install) mkdir -p node_modules && echo install >> installs.log ;;\nesac\n`
  )
  chmodSync(join(packageFolder, "bin", "bun"), 0o755)
  const tar = spawnSync("tar", ["-czf", "bun.tgz", "package"], { cwd: folder.path, encoding: "utf8" })
  if (tar.status !== 0) throw new Error(`tar: ${tar.stderr}`)
  const tarball = readFileSync(join(folder.path, "bun.tgz"))
  return {
    tarball,
    packument: (registry: string) => ({
      name: "bun",
      "dist-tags": { latest: "1.4.5" },
      versions: {
        "1.4.5": {
          name: "bun",
          version: "1.4.5",
          bin: { bun: "bin/bun" },
          dist: {
            tarball: `${registry}bun/-/bun-1.4.5.tgz`,
            integrity: `sha512-${createHash("sha512").update(tarball).digest("base64")}`,
            shasum: createHash("sha1").update(tarball).digest("hex")
          }
        }
      }
    })
  }
}

const failureLine = (registry: string) =>
  `Could not install Bun 1.4.5 from the npm registry ${registry} (npm's reason is above).`

describe("installing Bun where it is missing (scripts/with-bun.sh)", () => {
  it(
    "reads the global, the user's and the project's npmrc, as npm run in the project does, and names the registry that failed",
    async () => {
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
    },
    30_000
  )

  it("a registry that stops answering: npm's reason and the registry are told within the minute", async () => {
    // The first request fails at once and the retry hangs: npm's own bounds would wait 5 minutes.
    using registry = fakeRegistry((attempt) =>
      attempt === 1 ? new Response("", { status: 503 }) : new Promise(() => {})
    )
    const result = await installBun({ global: "", user: "", project: `registry=${registry.url}\n` })
    expect(result.exitCode).toBe(1)
    expect(result.seconds).toBeLessThan(60)
    expect(registry.requests.map(({ url }) => url)).toEqual([`${registry.url}bun`, `${registry.url}bun`])
    expect(result.stderr).toContain(`npm error network timeout at: ${registry.url}bun`)
    expect(result.stderr).toContain(failureLine(registry.url))
    expect(result.installed).toBe(false)
  }, 60_000)

  describe("two commands started at once on a fresh checkout (the README's second terminal)", () => {
    const bun = fakeBunPackage()

    it("both finish: one installs Bun and the dependencies, the other waits for it and installs nothing", async () => {
      let release = () => {}
      const released = new Promise<void>((resolve) => (release = resolve))
      using registry = fakeRegistry(async (attempt) => {
        const { url } = registry.requests[attempt - 1]!
        if (url.endsWith(".tgz")) {
          // Held until the other command is seen waiting, so that both run while Bun is installed.
          await released
          return new Response(bun.tarball)
        }
        return Response.json(bun.packument(registry.url))
      })
      using checkout = freshCheckout({ global: "", user: "", project: `registry=${registry.url}\n` })
      const commands = [checkout.start(["bun", "--version"]), checkout.start(["bun", "--version"])]
      const finished = Promise.all(commands.map(({ finished }) => finished))
      let done = false
      void finished.then(() => (done = true))
      const waiting = () => commands.some(({ stderr }) => stderr.text.includes("Waiting for another command"))
      // Released too if both ask the registry: the test then fails on what they asked, not at its bound.
      const asked = () => registry.requests.filter(({ url }) => url.endsWith("/bun")).length
      await waitFor(() => waiting() || asked() >= 2 || done, {
        what: "the second command waiting for the first",
        timeout: 60_000,
        interval: 20
      }).finally(release)
      const results = await finished
      for (const result of results) expect(result, result.stderr).toMatchObject({ exitCode: 0, stdout: "1.4.5\n" })
      expect(registry.requests.map(({ url }) => url)).toEqual([
        `${registry.url}bun`,
        `${registry.url}bun/-/bun-1.4.5.tgz`
      ])
      expect(results.filter(({ stderr }) => stderr.includes("Installing Bun 1.4.5"))).toHaveLength(1)
      expect(results.filter(({ stderr }) => stderr.includes("Waiting for another command"))).toHaveLength(1)
      expect(readFileSync(join(checkout.project, "installs.log"), "utf8")).toBe("install\n")
      expect(checkout.installed()).toBe(true)
      expect(existsSync(join(checkout.project, ".tools", "install.lock"))).toBe(false)
    }, 60_000)

    it("a lock left by an install that was killed is taken over", async () => {
      using registry = fakeRegistry((attempt) =>
        registry.requests[attempt - 1]!.url.endsWith(".tgz")
          ? new Response(bun.tarball)
          : Response.json(bun.packument(registry.url))
      )
      using checkout = freshCheckout({ global: "", user: "", project: `registry=${registry.url}\n` })
      const killed = Bun.spawn(["true"])
      await killed.exited
      mkdirSync(join(checkout.project, ".tools", "install.lock", String(killed.pid)), { recursive: true })
      const result = await checkout.start(["bun", "--version"]).finished
      expect(result, result.stderr).toMatchObject({ exitCode: 0, stdout: "1.4.5\n" })
      expect(result.stderr).not.toContain("Waiting for another command")
      expect(checkout.installed()).toBe(true)
      expect(existsSync(join(checkout.project, ".tools", "install.lock"))).toBe(false)
    }, 60_000)
  })
})
