import { connect, type Socket } from "node:net"
import { waitFor } from "./WaitFor.js"

/** A TCP connection to the server at `url` (`http://host:port`), for requests no HTTP client would send. */
export const openSocket = (url: string): Promise<Socket> => {
  const { hostname, port } = new URL(url)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => resolve(socket))
    socket.once("error", reject)
  })
}

/** An HTTP/1.1 answer as it came over the wire. */
export interface RawResponse {
  readonly status: number | undefined
  readonly headers: Record<string, string>
  readonly body: string
  /** Whether the server closed the connection. */
  readonly closed: boolean
}

const parse = (text: string, closed: boolean): RawResponse & { readonly bytes: string } => {
  const headEnd = text.indexOf("\r\n\r\n")
  const head = headEnd === -1 ? text : text.slice(0, headEnd)
  const [statusLine = "", ...lines] = head.split("\r\n")
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(":")
    if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
  }
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1]
  // Read as latin1 (one character a byte), so the body's length counts bytes; it is UTF-8.
  const bytes = headEnd === -1 ? "" : text.slice(headEnd + 4)
  return {
    status: status === undefined ? undefined : Number(status),
    headers,
    bytes,
    body: Buffer.from(bytes, "latin1").toString("utf8"),
    closed
  }
}

/**
 * Writes `request` byte for byte on a new connection and reads until the first answer is complete
 * (by its `Content-Length`), the server closes, or `waitMs` passes.
 */
export const rawRequest = async (url: string, request: string, waitMs = 2_000): Promise<RawResponse> => {
  const socket = await openSocket(url)
  return new Promise((resolve) => {
    let text = ""
    let finished = false
    const finish = (closed: boolean) => {
      if (finished) return
      finished = true
      socket.destroy()
      resolve(parse(text, closed))
    }
    void waitFor(() => finished, { what: "an answer", timeout: waitMs, interval: 10 }).catch(() => finish(false))
    socket.on("data", (chunk) => {
      text += chunk.toString("latin1")
      const response = parse(text, false)
      const length = response.headers["content-length"]
      if (length !== undefined && response.bytes.length >= Number(length)) finish(false)
    })
    socket.on("close", () => finish(true))
    socket.on("error", () => finish(true))
    socket.write(request)
  })
}

/** A GET request line and headers, as written on the wire. */
export const rawGet = (target: string, headers: Record<string, string> = {}) =>
  `GET ${target} HTTP/1.1\r\nHost: petstore.test\r\n${
    Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join("")
  }\r\n`
