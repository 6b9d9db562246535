import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { randomUUID } from "node:crypto"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { builtImage } from "./support/Build.js"
import { createPet, freePort } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

/** Podman to its end: its output, error output and exit code. */
const podmanResult = async (...args: ReadonlyArray<string>) => {
  const proc = Bun.spawn(["podman", ...args], { stdout: "pipe", stderr: "pipe" })
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited
  ])
  return { stdout, stderr, exitCode }
}

/** Podman to its end; fails with its output unless it exits 0. */
const podman = async (...args: ReadonlyArray<string>) => {
  const { exitCode, stderr, stdout } = await podmanResult(...args)
  if (exitCode !== 0) throw new Error(`podman ${args.join(" ")} failed (exit ${exitCode}): ${stdout}${stderr}`)
  return stdout.trim()
}

const root = new URL("..", import.meta.url).pathname

/** Every `podman run` or `docker run` command the README and docs/ show (the name alone is a mention), continuation lines joined. */
const documentedRuns = () =>
  ["README.md", ...readdirSync(join(root, "docs")).filter((name) => name.endsWith(".md")).map((name) => `docs/${name}`)]
    .flatMap((page) =>
      [...readFileSync(join(root, page), "utf8").replaceAll("\\\n", " ").matchAll(/\b(?:podman|docker) run\b[^`\n]+/g)]
        .map((match) => ({ page, command: match[0] }))
    )

const waitForReady = (url: string, container: string) =>
  waitFor(() => fetch(`${url}/readyz`).then((r) => r.ok, () => false), {
    what: "the container ready",
    timeout: 20_000,
    interval: 50
  }).catch(async () => {
    throw new Error(`the container did not become ready: ${await podman("logs", container).catch(String)}`)
  })

describe("the container image (Containerfile)", () => {
  const run = randomUUID().slice(0, 8)
  const volume = `petstore-test-${run}`
  const containers: Array<string> = []
  const volumes = [volume]
  let image = ""

  // The run's shared image (test/support/Build.ts): on a new machine it installs Podman and makes the base first.
  beforeAll(async () => {
    image = await builtImage()
    await podman("volume", "create", volume)
  }, 600_000)

  afterAll(async () => {
    for (const container of containers) await podman("rm", "--force", container).catch(() => undefined)
    for (const made of volumes) await podman("volume", "rm", "--force", made).catch(() => undefined)
  })

  const port = freePort()
  const metricsPort = freePort()
  const drainSeconds = 1
  const url = `http://127.0.0.1:${port}`

  /** What every container here is run with: these machines run Podman only with runc and lowered limits. */
  const runFlags = ["--runtime", "runc", "run", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]

  /** A container of the image on the volume. */
  const start = async (name: string, data = volume) => {
    containers.push(name)
    await podman(
      ...runFlags,
      "--detach",
      "--name",
      name,
      "--network",
      "host",
      "--env",
      `PORT=${port}`,
      "--env",
      `METRICS_PORT=${metricsPort}`,
      "--env",
      "HOST=127.0.0.1",
      "--env",
      "STOP_GRACE_SECONDS=0",
      "--env",
      `DRAIN_TIMEOUT_SECONDS=${drainSeconds}`,
      "--volume",
      `${data}:/data`,
      image
    )
    await waitForReady(url, name)
  }

  /** `podman run --rm -v VOLUME:/data IMAGE db …`, as docs/deployment.md runs a backup and a restore: no network needed. */
  const dbOnVolume = (data: string, ...args: ReadonlyArray<string>) =>
    podmanResult(...runFlags, "--rm", "--network", "none", "--volume", `${data}:/data`, image, "db", ...args)

  it("declares its user, volume, ports, stop signal and settings", async () => {
    const config = JSON.parse(await podman("image", "inspect", "--format", "{{json .Config}}", image)) as {
      User: string
      Env: Array<string>
      ExposedPorts: Record<string, unknown>
      Volumes: Record<string, unknown>
      StopSignal: string
      Entrypoint: Array<string>
    }
    expect(config.User).toBe("10001:10001")
    expect(Object.keys(config.ExposedPorts).sort()).toEqual(["3000/tcp", "9464/tcp"])
    expect(Object.keys(config.Volumes)).toEqual(["/data"])
    expect(config.StopSignal).toBe("SIGTERM")
    expect(config.Entrypoint).toEqual(["/usr/local/bin/petstore"])
    expect(config.Env).toEqual(
      expect.arrayContaining(["DATABASE_URL=/data/petstore.db", "METRICS_HOST=0.0.0.0", "HOST=0.0.0.0"])
    )
  })

  it(
    "serves as a user that is not root, stops on `podman stop` with exit code 0 within its bound, and keeps its data on the volume",
    async () => {
      const first = `petstore-test-${run}-1`
      await start(first)

      const made = await podman("exec", first, "petstore", "keys", "create", "--name", "container")
      const key = made.split("\n").at(-1)!
      expect(key).toMatch(/^ps_test_\S+$/)
      const created = await fetch(`${url}/v1/pets`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ name: "Rex", categoryId: 3, status: "available" })
      })
      expect(created.status).toBe(201)
      const pet = await created.json()
      // The metrics listener answers from outside the container.
      expect((await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).status).toBe(200)

      expect(await podman("exec", first, "id", "-u")).toBe("10001")
      // The server itself, the container's first process, as seen from the host.
      const pid = await podman("inspect", "--format", "{{.State.Pid}}", first)
      expect(/^Uid:\s+(\d+)/m.exec(await Bun.file(`/proc/${pid}/status`).text())![1]).toBe("10001")

      const stopping = performance.now()
      await podman("stop", "--time", "30", first)
      const stoppedIn = (performance.now() - stopping) / 1000
      // Grace (0) + drain + 2 s.
      expect(stoppedIn).toBeLessThan(drainSeconds + 2)
      expect(await podman("inspect", "--format", "{{.State.ExitCode}}", first)).toBe("0")

      const second = `petstore-test-${run}-2`
      await start(second)
      const listed = await fetch(`${url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
      expect(listed.status).toBe(200)
      expect(await listed.json()).toEqual([pet])
      await podman("stop", "--time", "30", second)
      expect(await podman("inspect", "--format", "{{.State.ExitCode}}", second)).toBe("0")
    },
    120_000
  )

  it("every documented podman run names its volume or removes its own, so none leaves an unnamed volume behind", () => {
    const runs = documentedRuns()
    expect(runs.length).toBeGreaterThan(0)
    const leaving = runs.filter(({ command }) =>
      !/\s--rm\b/.test(command) && !/\s(?:-v|--volume)[ =][\w.-]+:\/data\b/.test(command)
    )
    expect(leaving).toEqual([])
  })

  it(
    "backs up and restores on a named volume: db backup while it serves, db restore once stopped, and no id is handed out twice",
    async () => {
      const data = `petstore-test-${run}-restore`
      volumes.push(data)
      await podman("volume", "create", data)
      const name = `petstore-test-${run}-restore`
      await start(name, data)
      const key = (await podman("exec", name, "petstore", "keys", "create", "--name", "restore")).split("\n").at(-1)!
      const before = [await createPet(url, key, "Rex"), await createPet(url, key, "Fido")]

      const backup = await dbOnVolume(data, "backup", "/data/backups/petstore.db")
      expect(backup.stderr).toBe("")
      expect(backup.stdout).toMatch(/^backed up \/data\/petstore\.db to \/data\/backups\/petstore\.db .*pets 2, /)
      const after = [await createPet(url, key, "Tom"), await createPet(url, key, "Kitty")]

      // SQLite's lock on the volume's file is seen from another container.
      const refused = await dbOnVolume(data, "restore", "/data/backups/petstore.db")
      expect(refused.exitCode).toBe(1)
      expect(refused.stderr).toMatch(
        /^restore: \/data\/petstore\.db is open in another process \(SQLite's lock on the file is held/
      )

      await podman("stop", "--time", "30", name)
      const restored = await dbOnVolume(data, "restore", "/data/backups/petstore.db")
      expect(restored.stderr).toBe("")
      expect(restored.exitCode).toBe(0)
      expect(restored.stdout).toMatch(/; next ids pets 5, api_keys 2, above every id the replaced file handed out\n$/)

      await podman("start", name)
      await waitForReady(url, name)
      const listed = await fetch(`${url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })
      expect(((await listed.json()) as Array<{ id: number }>).map(({ id }) => id)).toEqual(before)
      expect(await createPet(url, key, "Felix")).toBeGreaterThan(Math.max(...before, ...after))
      await podman("stop", "--time", "30", name)
    },
    120_000
  )
})
