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
  beforeEach(() => vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] }))
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

  it.live("past 64 KiB, the batch is written at once, in whole lines of at most 4 KiB a write; the next has its 50 ms", () =>
    Effect.gen(function*() {
      const { lines, release, writes } = yield* collecting
      lines.add("first")
      vi.advanceTimersByTime(30)
      const long = "x".repeat(1023)
      for (let n = 0; n < 64; n++) lines.add(long)
      expect(writes.join("")).toBe("first\n" + `${long}\n`.repeat(64))
      // A pipe writes at most 4 KiB in one piece: workers sharing stdout cut none of each other's lines.
      for (const piece of writes) {
        expect(Buffer.byteLength(piece)).toBeLessThanOrEqual(4096)
        expect(piece.endsWith("\n")).toBe(true)
      }
      const written = writes.length
      lines.add("next")
      // Not at the first batch's 50 ms: its timer went with it.
      vi.advanceTimersByTime(49)
      expect(writes.length).toBe(written)
      vi.advanceTimersByTime(1)
      expect(writes.slice(written)).toEqual(["next\n"])
      yield* release
    }))

  it.live("a line longer than 4 KiB is written whole, in a write of its own", () =>
    Effect.gen(function*() {
      const { lines, release, writes } = yield* collecting
      const longer = "y".repeat(5000)
      lines.add("before")
      lines.add(longer)
      lines.add("after")
      yield* release
      expect(writes).toEqual(["before\n", `${longer}\n`, "after\n"])
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
      await waitFor(() => missing().length === 0, { what: () => `no line for ${missing().join(", ")}` })
    } finally {
      server.proc.kill("SIGKILL")
    }
  })
})
