import { beforeAll, describe, expect, it } from "@effect/vitest"
import { copyFileSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { builtExecutable } from "./support/Build.js"
import { freePort, isRunning, temporaryFolder } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

const root = new URL("..", import.meta.url).pathname

/** A command to its end, with its output and exit code. */
const run = async (command: ReadonlyArray<string>, options: { cwd: string; env: Record<string, string> }) => {
  const proc = Bun.spawn([...command], { cwd: options.cwd, env: options.env, stdout: "pipe", stderr: "pipe" })
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited
  ])
  return { stdout, stderr, exitCode }
}

const waitForLivez = (url: string, proc: Bun.Subprocess, logs: () => string) =>
  waitFor(async () => {
    if (proc.exitCode !== null) throw new Error(`the executable exited at its start: ${logs()}`)
    return fetch(`${url}/livez`).then((r) => r.ok, () => false)
  }, { what: () => `the executable did not start: ${logs()}`, timeout: 20_000 }).catch((error) => {
    proc.kill("SIGKILL")
    throw error
  })

describe("the executable dist/petstore", () => {
  let petstore = ""
  // The run's shared build; the first test file to ask makes it.
  beforeAll(async () => {
    petstore = await builtExecutable()
  }, 180_000)

  it("--version: the package's version and the commit it was built from", async () => {
    const { version } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }
    const result = await run([petstore, "--version"], { cwd: root, env: {} })
    expect(result.exitCode).toBe(0)
    const match = /^petstore (\S+) \(commit ([0-9a-f]{7,})\)\n$/.exec(result.stdout)
    expect(match, result.stdout).not.toBeNull()
    expect(match![1]).toBe(version)
    // A commit of this repository (HEAD may have moved on since the build).
    expect(Bun.spawnSync(["git", "cat-file", "-e", `${match![2]}^{commit}`], { cwd: root }).exitCode).toBe(0)
  })

  it("an unknown command: one line and exit code 1", async () => {
    const result = await run([petstore, "serve"], { cwd: root, env: {} })
    expect(result).toEqual({
      stdout: "",
      stderr: "Unknown command 'serve': expected keys, db, pets, --version or --help, or none to serve\n",
      exitCode: 1
    })
  })

  it(
    "keys, db and pets answer as `npm run keys`, `npm run db` and `npm run petstore` do: same output, same exit code",
    async () => {
      using folder = temporaryFolder()
      const env = {
        PATH: process.env["PATH"] ?? "",
        DATABASE_URL: join(folder.path, "petstore.db"),
        // Nothing listens there: the client's error line.
        PETSTORE_BASE_URL: `http://127.0.0.1:${freePort()}`,
        PETSTORE_API_KEY: "ps_test_none",
        NO_COLOR: "1"
      }
      const made = await run([petstore, "keys", "create", "--name", "first"], { cwd: folder.path, env })
      expect(made.exitCode, made.stderr).toBe(0)
      expect(made.stdout).toMatch(/^Created key 1 \(first\)\. It is shown this once; store it now:\nps_test_\S+\n$/)

      const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string, ReadonlyArray<string>]> = [
        [["keys", "list"], "src/bin/keys.ts", ["list"]],
        [["keys", "list", "--json"], "src/bin/keys.ts", ["list", "--json"]],
        [["keys", "create"], "src/bin/keys.ts", ["create"]],
        [["keys", "revoke", "99"], "src/bin/keys.ts", ["revoke", "99"]],
        [["keys", "--help"], "src/bin/keys.ts", ["--help"]],
        [["db", "status"], "src/bin/db.ts", ["status"]],
        [["db", "copy", "--to", "x.db"], "src/bin/db.ts", ["copy", "--to", "x.db"]],
        [["db", "--help"], "src/bin/db.ts", ["--help"]],
        [["pets", "list"], "src/bin/cli.ts", ["pets", "list"]],
        [["pets", "create", "--name", "Rex"], "src/bin/cli.ts", ["pets", "create", "--name", "Rex"]],
        [["pets", "--help"], "src/bin/cli.ts", ["pets", "--help"]]
      ]
      for (const [args, script, scriptArgs] of cases) {
        // None of these writes: the executable and the script may run side by side.
        const [fromExecutable, fromScript] = await Promise.all([
          run([petstore, ...args], { cwd: folder.path, env }),
          run(["bun", join(root, script), ...scriptArgs], { cwd: folder.path, env })
        ])
        expect(fromExecutable, `petstore ${args.join(" ")}`).toEqual(fromScript)
      }
    },
    60_000
  )

  it(
    "copied alone into an empty folder, with no network, no PATH, no Bun: serves, makes keys and answers with them",
    async () => {
      using folder = temporaryFolder()
      copyFileSync(petstore, join(folder.path, "petstore"))
      expect(readdirSync(folder.path)).toEqual(["petstore"])
      // Every program the executable starts gets no PATH at all (`env -i PATH=`); the shell driving it names its tools.
      const script = `
      set -e
      ip link set lo up
      cd "$1"
      petstore() { env -i PATH= STOP_GRACE_SECONDS=0 PETSTORE_API_KEY="\${key:-}" ./petstore "$@"; }
      # env execs the server: $! is its process.
      env -i PATH= STOP_GRACE_SECONDS=0 ./petstore >server.log 2>&1 &
      server=$!
      tries=0
      until grep -q '"listening"' server.log; do
        tries=$((tries + 1))
        if [ $tries -gt 400 ] || ! kill -0 $server 2>/dev/null; then cat server.log >&2; exit 3; fi
        sleep 0.05
      done
      key=$(petstore keys create --name offline | tail -n 1)
      echo "key $key"
      petstore pets create --name Rex --category-id 3 --status available --json | tr -d '\\n '; echo
      petstore pets list --json | tr -d '\\n '; echo
      kill -TERM $server
      code=0
      wait $server || code=$?
      echo "exit $code"
      head -n 1 server.log
    `
      // As root a network namespace of its own; otherwise in a user namespace too.
      const unshare = process.getuid?.() === 0 ? ["unshare", "-n"] : ["unshare", "-r", "-n"]
      const result = await run([...unshare, "sh", "-c", script, "offline", folder.path], {
        cwd: folder.path,
        env: { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" }
      })
      expect(result.exitCode, result.stdout + result.stderr).toBe(0)
      const lines = result.stdout.trim().split("\n")
      expect(lines[0]).toMatch(/^key ps_test_\S+$/)
      expect(lines[1]).toBe(`{"id":1,"name":"Rex","categoryId":3,"status":"available"}`)
      expect(lines[2]).toBe(`[{"id":1,"name":"Rex","categoryId":3,"status":"available"}]`)
      expect(lines[3]).toBe("exit 0")
      expect(lines[4]).toContain(`"message":"listening"`)
      // Its data where the default says, beside it: nothing else was needed or written.
      expect(readdirSync(folder.path).sort()).toEqual(["data", "petstore", "server.log"])
    },
    60_000
  )

  it(
    "WORKERS=2: the supervisor starts its workers from the executable itself, and all stop with exit code 0",
    async () => {
      using folder = temporaryFolder()
      const port = freePort()
      const proc = Bun.spawn([petstore], {
        cwd: folder.path,
        env: { HOST: "127.0.0.1", PORT: String(port), METRICS_PORT: "off", WORKERS: "2", STOP_GRACE_SECONDS: "0" },
        stdout: "pipe",
        stderr: "pipe"
      })
      let output = ""
      void new Response(proc.stdout).text().then((text) => (output += text))
      await waitForLivez(`http://127.0.0.1:${port}`, proc, () => output)
      const children = () =>
        readdirSync("/proc").filter((entry) => /^\d+$/.test(entry)).filter((pid) => {
          try {
            return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[1] === String(proc.pid)
          } catch {
            return false
          }
        })
      await waitFor(() => children().length >= 2, { what: "two workers", interval: 50 }).catch(() => undefined)
      const workers = children()
      expect(workers).toHaveLength(2)
      for (const pid of workers) {
        // The executable alone, no argument: its embedded entry (`/$bunfs/…`) is not passed on.
        expect(readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter((arg) => arg !== "")).toEqual([petstore])
      }
      proc.kill("SIGTERM")
      expect(await proc.exited).toBe(0)
      for (const pid of workers) expect(isRunning(Number(pid))).toBe(false)
    },
    60_000
  )
})
