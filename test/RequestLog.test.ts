import { afterEach, beforeEach, describe, expect, it, vi } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { join } from "node:path"
import { RequestLines } from "../src/Http/RequestLog.js"
import { startServer, temporaryFolder } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

const root = new URL("..", import.meta.url).pathname

/** The request lines' service in a scope of its own, with each write it makes and when. */
const collecting = Effect.gen(function*() {
  const writes: Array<string> = []
  const scope = yield* Scope.make()
  const context = yield* Layer.buildWithScope(
    RequestLines.layer((chunk) => writes.push(chunk)),
    scope
  )
  return { writes, lines: Context.get(context, RequestLines), release: Scope.close(scope, Exit.void) }
})

describe("the request log's lines, written in batches of at most 50 ms or 64 KiB", () => {
  // The batch's timer is the runtime's: faked, it moves only when the test moves it.
  beforeEach(() => vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setImmediate"] }))
  afterEach(() => vi.useRealTimers())

  it.live("lines added within 50 ms come out in one write, 50 ms after the first", () =>
    Effect.gen(function*() {
      const { lines, release, writes } = yield* collecting
      lines.add("one")
      vi.advanceTimersByTime(20)
      lines.add("two")
      vi.advanceTimersByTime(20)
      lines.add("three")
      vi.advanceTimersByTime(9)
      expect(writes).toEqual([])
      vi.advanceTimersByTime(1)
      expect(writes).toEqual(["one\ntwo\nthree\n"])
      yield* release
    }))

  it.live("past 64 KiB, the batch is written at once, and the next batch has its own 50 ms", () =>
    Effect.gen(function*() {
      const { lines, release, writes } = yield* collecting
      lines.add("first")
      vi.advanceTimersByTime(30)
      const long = "x".repeat(1023)
      for (let n = 0; n < 64; n++) lines.add(long)
      expect(writes.length).toBe(1)
      expect(writes[0]!.length).toBeGreaterThan(64 * 1024)
      expect(writes[0]!.startsWith("first\n")).toBe(true)
      lines.add("next")
      // Not at the first batch's 50 ms: its timer went with it.
      vi.advanceTimersByTime(49)
      expect(writes.length).toBe(1)
      vi.advanceTimersByTime(1)
      expect(writes[1]).toBe("next\n")
      yield* release
    }))

  it.live("the release writes what is held at once, and leaves no listener on the process's exit", () =>
    Effect.gen(function*() {
      const listeners = process.listenerCount("exit")
      const { lines, release, writes } = yield* collecting
      expect(process.listenerCount("exit")).toBe(listeners + 1)
      lines.add("held")
      yield* release
      expect(writes).toEqual(["held\n"])
      expect(process.listenerCount("exit")).toBe(listeners)
    }))

  // A stop past its deadline calls `process.exit`; a fatal error ends the process too. Lines past what a pipe holds
  // (64 KiB) are written in full, though the process ends at once.
  const padding = "x".repeat(300)
  for (const end of ["process.exit(1)", `throw new Error("fatal")`]) {
    it(`on stdout, what is held is written when the process ends: ${end}`, async () => {
      const script = `
        import { Context, Effect, Layer, Scope } from "effect"
        import { RequestLines } from "./src/Http/RequestLog.ts"
        const scope = Effect.runSync(Scope.make())
        const lines = Context.get(Effect.runSync(Layer.buildWithScope(RequestLines.Stdout, scope)), RequestLines)
        for (let n = 0; n < 1000; n++) lines.add("line " + n + " ${padding}")
        ${end}`
      const proc = Bun.spawn(["bun", "-e", script], { cwd: root, stdout: "pipe", stderr: "pipe" })
      const [stdout, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited])
      expect(code).toBe(1)
      expect(stdout).toBe(Array.from({ length: 1000 }, (_, n) => `line ${n} ${padding}\n`).join(""))
    })
  }
})

describe("a stop by signal loses no request's line", () => {
  it("SIGTERM right after the last answer: every request answered is in the log", async () => {
    using folder = temporaryFolder()
    const server = await startServer({ DATABASE_URL: join(folder.path, "petstore.db"), LOG_LEVEL: "info" })
    try {
      const ids = Array.from({ length: 20 }, (_, n) => `before-the-stop-${n}`)
      for (const id of ids) {
        const response = await fetch(`${server.url}/livez`, { headers: { "x-request-id": id } })
        expect(response.status).toBe(200)
        await response.arrayBuffer()
      }
      expect(await server.stop("SIGTERM")).toBe(0)
      // The process has exited: what it wrote is still being read from its pipe.
      const missing = () => ids.filter((id) => !server.logs().includes(`"requestId":"${id}"`))
      await waitFor(() => missing().length === 0, { what: () => `no line for ${missing().join(", ")}`, timeout: 1000 })
    } finally {
      server.proc.kill("SIGKILL")
    }
  })
})
