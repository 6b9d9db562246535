import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { join } from "node:path"
import { rawGet, rawRequest } from "./support/RawSocket.js"
import { startServer, temporaryFolder } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

describe("requests Bun answers by itself, and those it lets the service answer (the real server process)", () => {
  const folder = temporaryFolder()
  let server: Awaited<ReturnType<typeof startServer>>
  const requestLines = () => server.logs().split("\n").filter((line) => line.includes(`"message":"request"`))
  /**
   * A request the service logs, waited for until its line is written: every line of a request
   * answered before it is then written too, however loaded the machine.
   */
  const logged = async (requestId: string) => {
    await rawRequest(server.url, rawGet("/livez", { "x-request-id": requestId }))
    await waitFor(() => requestLines().some((line) => line.includes(`"requestId":"${requestId}"`)), {
      what: `the line of request ${requestId}`,
      timeout: 5000
    }).catch(() => undefined)
    return requestLines()
  }
  beforeAll(async () => {
    server = await startServer({ DATABASE_URL: join(folder.path, "petstore.db"), LOG_LEVEL: "info" })
  })
  afterAll(async () => {
    await server.stop()
    folder[Symbol.dispose]()
  })

  it("a malformed request never reaches the service: Bun answers 431 or 400 with an empty body and closes", async () => {
    const cases: ReadonlyArray<readonly [string, number, string]> = [
      ["headers over 16 KiB", 431, rawGet("/livez", { "x-padding": "a".repeat(17_000) })],
      ["a URL over 16 KiB", 431, rawGet(`/livez?${"a".repeat(17_000)}`)],
      [
        "a Content-Length that is not a number",
        400,
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"
      ],
      [
        "two Content-Lengths",
        400,
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"
      ],
      [
        "both Content-Length and Transfer-Encoding",
        400,
        "POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
      ]
    ]
    const before = await logged("before-malformed")
    for (const [name, status, request] of cases) {
      const response = await rawRequest(server.url, request)
      expect(response.status, name).toBe(status)
      expect(response.body, name).toBe("")
      expect(response.closed, name).toBe(true)
    }
    // An unknown method, or one not in capitals, is dropped without an answer.
    for (const request of ["FOO /livez HTTP/1.1\r\nHost: x\r\n\r\n", "get /livez HTTP/1.1\r\nHost: x\r\n\r\n"]) {
      const response = await rawRequest(server.url, request)
      expect(response.status, request).toBeUndefined()
      expect(response.closed, request).toBe(true)
    }
    const after = await logged("after-malformed")
    expect(after.slice(before.length)).toEqual([expect.stringContaining(`"requestId":"after-malformed"`)])
  })

  it("whatever Bun lets through gets the Error body: other methods, a URL just under the limit", async () => {
    for (const method of ["QUERY", "TRACE", "PROPFIND", "PURGE", "CONNECT", "PATCH"]) {
      const response = await rawRequest(server.url, `${method} /v1/pets HTTP/1.1\r\nHost: x\r\n\r\n`)
      expect(response.status, method).toBe(405)
      expect(response.headers["content-type"], method).toBe("application/json")
      expect(response.headers["allow"], method).toBe("GET, POST")
      expect(JSON.parse(response.body), method).toEqual({
        code: "method_not_allowed",
        message: `method: ${method} is not allowed on /v1/pets; use GET, POST`,
        status: 405
      })
    }
    const longPath = `/${"a".repeat(16_000)}`
    const response = await rawRequest(server.url, rawGet(longPath))
    expect(response.status).toBe(404)
    expect(JSON.parse(response.body), response.body.slice(0, 200)).toEqual({
      code: "route_not_found",
      message: `path: no route /${"a".repeat(63)}…`,
      status: 404
    })
  })
})
