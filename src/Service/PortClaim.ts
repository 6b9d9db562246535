import { Effect } from "effect"
import { connect } from "node:net"

/**
 * The name a service holds while it serves `port`: a Linux abstract Unix socket, which needs no
 * file and which the kernel releases the moment the process ends, however it ends (SIGKILL too).
 * Named by the port alone: with SO_REUSEPORT the kernel also lets `0.0.0.0:3000` and
 * `127.0.0.1:3000` share connections.
 */
const claimName = (port: number) => `\0petstore:${port}`

/** Where a connection to `host` lands on this machine: a wildcard address is served on the loopback. */
const reachable = (host: string) => host === "0.0.0.0" ? "127.0.0.1" : host === "::" ? "::1" : host

/** Whether something accepts connections on `host:port` within a second (a refusal or silence: no). */
const accepts = (host: string, port: number) =>
  Effect.callback<boolean>((resume) => {
    const socket = connect({ host: reachable(host), port })
    socket.once("connect", () => {
      socket.destroy()
      resume(Effect.succeed(true))
    })
    socket.once("error", () => resume(Effect.succeed(false)))
    return Effect.sync(() => socket.destroy())
  }).pipe(Effect.timeoutOrElse({ duration: "1 second", orElse: () => Effect.succeed(false) }))

/**
 * One port, one service: claims `port` for this service (the single server, or the supervisor whose
 * workers share the port) for as long as the scope lasts, or fails with one line if another
 * service serves it. Binding the port cannot tell, as the kernel lets any process of the same user
 * join a port bound with SO_REUSEPORT; so the claim is a name only one process can hold, and, for
 * a server that holds none (another program, an older release of this one), a connection attempt.
 * Neither listens on the port.
 */
export const claimPort = (host: string, port: number) =>
  Effect.gen(function*() {
    const where = `Cannot serve on ${host}:${port} (HOST, PORT)`
    // Abstract sockets are Linux's; elsewhere only the connection attempt below stands.
    if (process.platform === "linux") {
      yield* Effect.acquireRelease(
        Effect.try({
          try: () =>
            Bun.listen({ unix: claimName(port), socket: { open: (socket) => void socket.end(), data: () => {} } }),
          catch: (cause) => cause as Error & { readonly code?: string }
        }),
        (claim) => Effect.sync(() => claim.stop(true))
      ).pipe(Effect.catch((cause) =>
        cause.code === "EADDRINUSE"
          ? Effect.fail(
            new Error(
              `${where}: another Pet Store service already serves port ${port}; stop it first, or choose another PORT`
            )
          )
          // Unix sockets forbidden (systemd's RestrictAddressFamilies): the service runs, unguarded against its kind.
          : Effect.logWarning(`cannot claim port ${port} for this service alone: ${cause.message}`)
      ))
    }
    if (yield* accepts(host, port)) {
      return yield* Effect.fail(
        new Error(
          `${where}: another process already accepts connections on port ${port}; stop it first, or choose another PORT`
        )
      )
    }
  })
