import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { randomUUID } from "node:crypto"
import { builtImage } from "./support/Build.js"
import { freePort } from "./support/ServerProcess.js"

/** Podman to its end; fails with its output unless it exits 0. */
const podman = async (...args: ReadonlyArray<string>) => {
  const proc = Bun.spawn(["podman", ...args], { stdout: "pipe", stderr: "pipe" })
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited
  ])
  if (exitCode !== 0) throw new Error(`podman ${args.join(" ")} failed (exit ${exitCode}): ${stdout}${stderr}`)
  return stdout.trim()
}

const waitForReady = async (url: string, container: string) => {
  for (const deadline = performance.now() + 20_000; !(await fetch(`${url}/readyz`).then((r) => r.ok, () => false));) {
    if (performance.now() > deadline) {
      throw new Error(`the container did not become ready: ${await podman("logs", container).catch(String)}`)
    }
    await Bun.sleep(50)
  }
}

describe("the container image (Containerfile)", () => {
  const run = randomUUID().slice(0, 8)
  const volume = `petstore-test-${run}`
  const containers: Array<string> = []
  let image = ""

  // The run's shared image (test/support/Build.ts): on a new machine it installs Podman and makes the base first.
  beforeAll(async () => {
    image = await builtImage()
    await podman("volume", "create", volume)
  }, 600_000)

  afterAll(async () => {
    for (const container of containers) await podman("rm", "--force", container).catch(() => undefined)
    await podman("volume", "rm", "--force", volume).catch(() => undefined)
  })

  const port = freePort()
  const metricsPort = freePort()
  const drainSeconds = 1
  const url = `http://127.0.0.1:${port}`

  /** A container of the image on the volume; these machines run Podman only with runc and lowered limits. */
  const start = async (name: string) => {
    containers.push(name)
    await podman(
      "--runtime", "runc", "run", "--detach", "--name", name,
      "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", "--network", "host",
      "--env", `PORT=${port}`, "--env", `METRICS_PORT=${metricsPort}`, "--env", "HOST=127.0.0.1",
      "--env", "STOP_GRACE_SECONDS=0", "--env", `DRAIN_TIMEOUT_SECONDS=${drainSeconds}`,
      "--volume", `${volume}:/data`,
      image
    )
    await waitForReady(url, name)
  }

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
    expect(config.Env).toEqual(expect.arrayContaining(["DATABASE_URL=/data/petstore.db", "METRICS_HOST=0.0.0.0", "HOST=0.0.0.0"]))
  })

  it("serves as a user that is not root, stops on `podman stop` with exit code 0 within its bound, and keeps its data on the volume", async () => {
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
  }, 120_000)
})
