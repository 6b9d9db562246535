import { createServer, type Server, Socket } from "node:net"

/**
 * A TCP forwarder on a loopback port in front of a server (`host:port`), as a network path looks
 * to a client: it relays both ways until `stall()`, then keeps every connection open and relays
 * nothing more, neither way (a frozen host behind a live link: the kernel still accepts and
 * acknowledges, nothing answers). With `stalled: true` it accepts and never answers from the start.
 */
export interface StallingProxy {
  readonly port: number
  /** A copy of `url` (`postgres://…`) pointing at the proxy instead. */
  readonly through: (url: string) => string
  readonly stall: () => void
  /** Bytes relayed from the client to the server so far. */
  readonly forwarded: () => number
  readonly [Symbol.asyncDispose]: () => Promise<void>
}

export const stallingProxy = async (
  target: { readonly host: string; readonly port: number },
  options: { readonly stalled?: boolean } = {}
): Promise<StallingProxy> => {
  let stalled = options.stalled === true
  let forwarded = 0
  const sockets = new Set<Socket>()
  const track = (socket: Socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
    socket.on("error", () => socket.destroy())
  }
  const relay = (from: Socket, to: Socket, count: boolean) =>
    from.on("data", (chunk) => {
      if (stalled) {
        // Read no further: the sender's buffers fill as a hung peer's would.
        from.pause()
        return
      }
      if (count) forwarded += chunk.length
      to.write(chunk)
    })
  const server: Server = createServer((client) => {
    track(client)
    if (stalled) return void client.pause()
    const upstream = new Socket()
    track(upstream)
    upstream.connect(target.port, target.host)
    relay(client, upstream, true)
    relay(upstream, client, false)
    client.on("close", () => !stalled && upstream.destroy())
    upstream.on("close", () => !stalled && client.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as { port: number }).port
  return {
    port,
    through: (url) => {
      const via = new URL(url)
      via.hostname = "127.0.0.1"
      via.port = String(port)
      return via.href
    },
    stall: () => {
      stalled = true
      for (const socket of sockets) socket.pause()
    },
    forwarded: () => forwarded,
    [Symbol.asyncDispose]: async () => {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}
