import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { join } from "node:path"
import { openSocket, rawGet, rawRequest } from "./support/RawSocket.js"
import { runCommand, startServer, temporaryFolder } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

/** The request log lines of the server so far, by request id. */
const requestLines = (logs: string) =>
  logs.split("\n").filter((line) => line.includes(`"message":"request"`)).map((line) => JSON.parse(line).annotations)

/** Waits until the server logged the request with id `requestId`, and returns its line. */
const loggedRequest = (logs: () => string, requestId: string) =>
  waitFor(() => requestLines(logs()).find((annotations) => annotations.requestId === requestId), {
    what: () => `no request line for ${requestId}: ${logs()}`,
    timeout: 2000,
    interval: 20
  })

/** Writes `data` on a new connection, waits `ms`, then closes it without reading an answer. */
const sendThenHangUp = async (url: string, data: string, ms: number) => {
  const socket = await openSocket(url)
  socket.write(data)
  // Fixed: the client's silence before it hangs up is the subject.
  await Bun.sleep(ms)
  socket.destroy()
}

describe("a client that hangs up is logged 499 client_closed_request, never as a server error; one still connected is answered", () => {
  const folder = temporaryFolder()
  const env = { DATABASE_URL: join(folder.path, "petstore.db"), LOG_LEVEL: "info", AUTH_FAILURES_PER_MINUTE: "4" }
  let server: Awaited<ReturnType<typeof startServer>>
  let key: string
  beforeAll(async () => {
    key = (await runCommand(["src/bin/keys.ts", "create", "--name", "hangups"], env)).stdout.trim().split("\n").at(-1)!
    server = await startServer(env)
  })
  afterAll(async () => {
    await server.stop()
    folder[Symbol.dispose]()
  })

  const post = (requestId: string, headers: string) =>
    `POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
    `X-Request-Id: ${requestId}\r\n${headers}\r\n`

  it("a body cut short of its Content-Length", async () => {
    await sendThenHangUp(server.url, post("cut-declared", "Content-Length: 100\r\n") + `{"name":"Rex",`, 100)
    expect(await loggedRequest(server.logs, "cut-declared")).toMatchObject({
      method: "POST",
      path: "/v1/pets",
      status: 499
    })
  })

  it("a chunked body that stops before its last chunk", async () => {
    await sendThenHangUp(
      server.url,
      post("cut-chunked", "Transfer-Encoding: chunked\r\n") + `e\r\n{"name":"Rex",\r\n`,
      100
    )
    expect(await loggedRequest(server.logs, "cut-chunked")).toMatchObject({
      method: "POST",
      path: "/v1/pets",
      status: 499
    })
  })

  it("a connection closed while its failed authentication is slowed", async () => {
    // Past half of AUTH_FAILURES_PER_MINUTE, each further 401 waits: 200 ms for the third.
    const wrong = { authorization: "Bearer ps_test_wrong" }
    for (const id of ["fail-1", "fail-2"]) {
      expect((await rawRequest(server.url, rawGet("/v1/pets", { ...wrong, "x-request-id": id }))).status).toBe(401)
    }
    await sendThenHangUp(server.url, rawGet("/v1/pets", { ...wrong, "x-request-id": "slowed-401" }), 50)
    expect(await loggedRequest(server.logs, "slowed-401")).toMatchObject({
      method: "GET",
      path: "/v1/pets",
      status: 499
    })
  })

  it("a POST with neither Content-Length nor chunks, its client waiting: 400 malformed_json as an empty body, never 499", async () => {
    // HTTP/1.1's empty body, sent by hand: every HTTP client writes `Content-Length: 0`.
    const answer = await rawRequest(server.url, post("no-length", ""))
    expect(answer).toMatchObject({ status: 400, closed: false })
    expect(answer.headers["x-request-id"]).toBe("no-length")
    expect(JSON.parse(answer.body)).toEqual({
      code: "malformed_json",
      message: "body: is empty; a JSON object is required",
      status: 400
    })
    expect(await loggedRequest(server.logs, "no-length")).toMatchObject({
      method: "POST",
      path: "/v1/pets",
      status: 400
    })
  })

  it("none of them was logged as a failure of the service", () => {
    const lines = requestLines(server.logs())
    expect(lines.filter(({ status }) => status >= 500)).toEqual([])
    expect(server.logs()).not.toContain("request failed")
    // Nothing was stored from a body that never arrived.
    expect(lines.filter(({ status }) => status === 201)).toEqual([])
  })
})
