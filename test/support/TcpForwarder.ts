import net from "node:net"

/**
 * A database's address as the network moves or loses it: a TCP forwarder on a loopback port of its
 * own, relaying each connection to the server it points at. `freeze` makes it a frozen host (or a
 * path that stops relaying): every connection, open or new, is held open and relays nothing more
 * either way, never reset, as a host that died without a word looks from outside; `frozen: true`
 * makes one that accepts and never answers from the start. `moveTo` points new connections at
 * another server (the standby promoted), which answer again; the frozen ones stay frozen.
 * `resetAll` ends every open connection, as a server that stopped does.
 */
export const tcpForwarder = async (targetPort: number, options: { readonly frozen?: boolean } = {}) => {
  let target = targetPort
  let frozen = options.frozen === true
  const links = new Set<{ readonly client: net.Socket; readonly server: net.Socket; frozen: boolean }>()
  const hold = (link: { readonly client: net.Socket; readonly server: net.Socket; frozen: boolean }) => {
    link.frozen = true
    link.client.pause()
    link.server.pause()
  }
  const listener = net.createServer((client) => {
    const server = net.connect({ host: "127.0.0.1", port: target })
    const link = { client, server, frozen: false }
    links.add(link)
    const end = () => {
      links.delete(link)
      client.destroy()
      server.destroy()
    }
    client.on("data", (chunk) => link.frozen || server.write(chunk))
    server.on("data", (chunk) => link.frozen || client.write(chunk))
    for (const socket of [client, server]) {
      socket.on("error", () => {})
      socket.on("close", () => link.frozen || end())
    }
    if (frozen) hold(link)
  })
  await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve))
  const port = (listener.address() as net.AddressInfo).port
  return {
    port,
    /** A copy of `url` (`postgres://…`) pointing at the forwarder instead. */
    through: (url: string) => {
      const via = new URL(url)
      via.hostname = "127.0.0.1"
      via.port = String(port)
      return via.href
    },
    freeze: () => {
      frozen = true
      for (const link of links) hold(link)
    },
    moveTo: (port: number) => {
      target = port
      frozen = false
    },
    resetAll: () => {
      for (const link of links) {
        links.delete(link)
        link.client.resetAndDestroy()
        link.server.destroy()
      }
    },
    [Symbol.asyncDispose]: async () => {
      for (const { client, server } of links) {
        client.destroy()
        server.destroy()
      }
      links.clear()
      await new Promise<void>((resolve) => listener.close(() => resolve()))
    }
  }
}
