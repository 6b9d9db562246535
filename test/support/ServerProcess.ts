import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { waitFor } from "./WaitFor.js"

const root = new URL("../..", import.meta.url).pathname

/** Whether a process with this id is still there. */
export const isRunning = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** A port nothing listens on right now. */
export const freePort = (): number => {
  const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() })
  const port = probe.port!
  probe.stop(true)
  return port
}

export const temporaryFolder = () => {
  const path = mkdtempSync(join(tmpdir(), "petstore-e2e-"))
  return { path, [Symbol.dispose]: () => rmSync(path, { recursive: true, force: true }) }
}

const collect = (stream: ReadableStream<Uint8Array>) => {
  const output = { text: "" }
  void (async () => {
    const decoder = new TextDecoder()
    const reader = stream.getReader()
    for (let read = await reader.read(); !read.done; read = await reader.read()) {
      output.text += decoder.decode(read.value, { stream: true })
    }
  })()
  return output
}

/** Runs a command of the project (`bun src/...`) to its end. */
export const runCommand = async (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const proc = Bun.spawn(["bun", ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdout: "pipe",
    stderr: "pipe"
  })
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited
  ])
  return { stdout, stderr, exitCode }
}

/** A new API key in the database `env` names, made by the keys command; the key itself. */
export const createKey = async (env: Record<string, string>, name = "test") =>
  (await runCommand(["src/bin/keys.ts", "create", "--name", name], env)).stdout.trim().split("\n").at(-1)!

/**
 * `bun src/bin/main.ts` on `port` with `env`, its output piped, not waited for. Metrics off unless a
 * test asks: servers started side by side would all want port 9464. No stop's grace unless a test
 * asks: it is for a load balancer, which only some tests have.
 */
export const spawnServer = (env: Record<string, string>, port: number) =>
  Bun.spawn(["bun", "src/bin/main.ts"], {
    cwd: root,
    env: {
      ...process.env,
      HOST: "127.0.0.1",
      PORT: String(port),
      METRICS_PORT: "off",
      STOP_GRACE_SECONDS: "0",
      ...env
    },
    stdout: "pipe",
    stderr: "pipe"
  })

/** The real server, `bun src/bin/main.ts`, started with `env` on `port` and waited for until it answers. */
export const startServer = async (env: Record<string, string>, port = freePort()) => {
  const startedAt = performance.now()
  const proc = spawnServer(env, port)
  const stdout = collect(proc.stdout)
  const stderr = collect(proc.stderr)
  const url = `http://127.0.0.1:${port}`
  // Generous: on a loaded machine a start (WORKERS, a migration) can take seconds, and how fast
  // it is belongs to the tests that measure it, not to every test that needs a server.
  await waitFor(async () => {
    if (proc.exitCode !== null) throw new Error(`The server exited at its start: ${stdout.text}${stderr.text}`)
    return fetch(`${url}/livez`).then((r) => r.ok, () => false)
  }, { what: () => `The server did not start: ${stdout.text}${stderr.text}`, timeout: 20_000 }).catch((error) => {
    proc.kill()
    throw error
  })
  return {
    url,
    proc,
    startupMs: performance.now() - startedAt,
    logs: () => stdout.text + stderr.text,
    stop: async (signal: NodeJS.Signals = "SIGTERM") => {
      proc.kill(signal)
      return proc.exited
    }
  }
}

/** A pet created over HTTP with `key`, which must answer 201; its id. */
export const createPet = async (url: string, key: string, name: string): Promise<number> => {
  const response = await fetch(`${url}/v1/pets`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ name, categoryId: 1 })
  })
  if (response.status !== 201) throw new Error(`a create answered ${response.status}: ${await response.text()}`)
  return ((await response.json()) as { id: number }).id
}
