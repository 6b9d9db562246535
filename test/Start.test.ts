import { afterEach, describe, expect, it } from "@effect/vitest"
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  writeFileSync
} from "node:fs"
import { join } from "node:path"
import packageJson from "../package.json" with { type: "json" }
import { freePort, isRunning, temporaryFolder } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

const root = new URL("..", import.meta.url).pathname

/**
 * A copy of the project's sources beside the installed dependencies, so that `npm start` builds
 * and changes sources there and never under the other tests.
 */
const projectCopy = () => {
  const folder = temporaryFolder()
  const copy = Bun.spawnSync([
    "cp",
    "-a",
    "src",
    "scripts",
    "package.json",
    "bun.lock",
    "bunfig.toml",
    "tsconfig.json",
    folder.path
  ], {
    cwd: root
  })
  if (copy.exitCode !== 0) throw new Error(copy.stderr.toString())
  Bun.spawnSync(["ln", "-s", join(root, "node_modules"), join(folder.path, "node_modules")])
  return folder
}

/** The process ids below `pid`, from /proc. */
const descendants = (pid: number): Array<number> => {
  const children = readdirSync(`/proc/${pid}/task`).flatMap((task) =>
    readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number)
  )
  return children.flatMap((child) => [child, ...descendants(child)])
}

/** Every process a test started, killed after it whatever the outcome, so a failure leaves no server. */
const started = new Set<number>()
afterEach(() => {
  for (const pid of started) {
    for (const each of [pid, ...(isRunning(pid) ? descendants(pid) : [])]) {
      try {
        process.kill(each, "SIGKILL")
      } catch {
        // already gone
      }
    }
  }
  started.clear()
})

/** `npm start` in `cwd` as a supervisor runs it, waited for until it answers. */
const npmStart = async (cwd: string, options: { readonly ownProcessGroup?: boolean } = {}) => {
  const port = freePort()
  // A folder DATABASE_URL names must exist (only the default's is made).
  mkdirSync(join(cwd, "data"), { recursive: true })
  const database = join(cwd, "data", `${port}.db`)
  const proc = Bun.spawn(["npm", "start"], {
    cwd,
    env: { ...process.env, HOST: "127.0.0.1", PORT: String(port), DATABASE_URL: database, METRICS_PORT: "off" },
    stdout: "pipe",
    stderr: "pipe",
    detached: options.ownProcessGroup ?? false
  })
  started.add(proc.pid)
  const output = Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]).then(([out, err]) =>
    out + err
  )
  const url = `http://127.0.0.1:${port}`
  await waitFor(async () => {
    if (proc.exitCode !== null) throw new Error("it exited")
    return fetch(`${url}/livez`).then((r) => r.ok, () => false)
  }, { what: "npm start answering /livez", timeout: 20_000 }).catch(async (error: Error) => {
    proc.kill("SIGKILL")
    throw new Error(`npm start did not answer (${error.message}): ${await output}`)
  })
  return { proc, url, port, output }
}

const npmBuild = async (cwd: string) => {
  const proc = Bun.spawn(["npm", "run", "build"], { cwd, stdout: "pipe", stderr: "pipe" })
  const output = await new Response(proc.stderr).text()
  expect(await proc.exited, output).toBe(0)
}

/** Whether anything accepts connections on the port. */
const listening = (port: number) =>
  Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } }).then((socket) => {
    socket.end()
    return true
  }, () => false)

/** The folder of the build `dist` names now. */
const currentBuild = (cwd: string) => join(cwd, readlinkSync(join(cwd, "dist")))

/** Each file of a build with its inode, modification time and content hash. */
const snapshot = (build: string) =>
  Object.fromEntries(
    readdirSync(build).sort().map((name) => {
      const stat = statSync(join(build, name))
      return [name, {
        inode: stat.ino,
        modified: stat.mtimeMs,
        hash: Bun.hash(readFileSync(join(build, name))).toString()
      }]
    })
  )

describe("npm start", () => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`${signal} to the process npm start made drains the server and exits 0, leaving nothing behind`, async () => {
      using project = projectCopy()
      const server = await npmStart(project.path)
      const below = descendants(server.proc.pid)
      expect(below.length).toBeGreaterThan(0)
      process.kill(server.proc.pid, signal)
      expect(await server.proc.exited).toBe(0)
      expect(await server.output).toContain("stopping: finishing the requests in flight")
      expect(await listening(server.port)).toBe(false)
      expect(below.filter(isRunning)).toEqual([])
    }, 90_000)
  }

  it("Ctrl-C in a terminal (SIGINT to npm and the server at once) still drains and exits 0", async () => {
    using project = projectCopy()
    const server = await npmStart(project.path, { ownProcessGroup: true })
    const below = descendants(server.proc.pid)
    process.kill(-server.proc.pid, "SIGINT")
    expect(await server.proc.exited).toBe(0)
    expect(await server.output).toContain("stopping: finishing the requests in flight")
    expect(await listening(server.port)).toBe(false)
    expect(below.filter(isRunning)).toEqual([])
  }, 90_000)

  it("a second start builds only when the sources changed, and never touches the running server's build", async () => {
    using project = projectCopy()
    const first = await npmStart(project.path)
    const running = currentBuild(project.path)
    const before = snapshot(running)
    expect(Object.keys(before)).toEqual([".inputs", "main.js", "main.js.jsc"])

    // Same sources: no build, the same build started.
    const unchanged = await npmStart(project.path)
    expect(currentBuild(project.path)).toBe(running)
    unchanged.proc.kill("SIGTERM")
    expect(await unchanged.proc.exited).toBe(0)
    expect(await unchanged.output).not.toContain("(entry-point)")

    // A changed source: a new build beside the running one, whose files stay as they were.
    appendFileSync(join(project.path, "src", "main.ts"), "\n// changed\n")
    const changed = await npmStart(project.path)
    const rebuilt = currentBuild(project.path)
    expect(rebuilt).not.toBe(running)
    expect(snapshot(running)).toEqual(before)
    expect((await fetch(`${first.url}/livez`)).status).toBe(200)
    changed.proc.kill("SIGTERM")
    expect(await changed.proc.exited).toBe(0)
    expect(await changed.output).toContain("(entry-point)")

    // Later builds remove earlier ones, but never the one a server runs from.
    await npmBuild(project.path)
    expect(currentBuild(project.path)).not.toBe(rebuilt)
    expect(snapshot(running)).toEqual(before)
    expect((await fetch(`${first.url}/livez`)).status).toBe(200)
    first.proc.kill("SIGTERM")
    expect(await first.proc.exited).toBe(0)
    await npmBuild(project.path)
    expect(readdirSync(join(project.path, ".build")).length).toBe(2)
    expect(existsSync(running)).toBe(false)
  }, 120_000)

  it("on a Node.js older than package.json's engines, stops with one line saying so and starts nothing", async () => {
    expect(packageJson.engines.node).toBe(">=20")
    using bin = temporaryFolder()
    // A node that reports an old release and runs npm itself with the real one.
    writeFileSync(
      join(bin.path, "node"),
      `#!/bin/sh\n[ "$1" = --version ] && { echo v18.19.0; exit 0; }\nexec '${Bun.which("node")}' "$@"\n`
    )
    chmodSync(join(bin.path, "node"), 0o755)
    const port = freePort()
    const proc = Bun.spawn(["npm", "start"], {
      cwd: root,
      env: { ...process.env, PATH: `${bin.path}:${process.env.PATH}`, PORT: String(port), METRICS_PORT: "off" },
      stdout: "pipe",
      stderr: "pipe"
    })
    started.add(proc.pid)
    const [stdout, stderr, exitCode] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited
    ])
    expect(exitCode).toBe(1)
    // npm's own notices aside (its banner on stdout, config warnings), the only output is the line.
    expect(stderr.split("\n").filter((line) => line !== "" && !/^npm (warn|notice)/.test(line)))
      .toEqual([`petstore needs Node.js 20 or later; ${join(bin.path, "node")} is v18.19.0`])
    expect(stdout).not.toMatch(/listening|Installing|error/i)
    expect(await fetch(`http://127.0.0.1:${port}/livez`).then(() => true, () => false)).toBe(false)
  })
})
