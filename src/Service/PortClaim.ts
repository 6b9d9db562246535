import { Effect } from "effect"
import { connect } from "node:net"

/** Whether something accepts connections on `host:port` within a second (a wildcard address on the loopback). */
const accepts = (host: string, port: number) =>
  Effect.callback<boolean>((resume) => {
    const socket = connect({ host: host === "0.0.0.0" ? "127.0.0.1" : host === "::" ? "::1" : host, port })
    socket.once("connect", () => {
      socket.destroy()
      resume(Effect.succeed(true))
    })
    socket.once("error", () => resume(Effect.succeed(false)))
    return Effect.sync(() => socket.destroy())
  }).pipe(Effect.timeoutOrElse({ duration: "1 second", orElse: () => Effect.succeed(false) }))

/**
 * Claims `port` while the scope lasts, or fails with one line. SO_REUSEPORT lets any process of the user bind it:
 * the claim is a Linux abstract socket named by the port, released however the process ends, and a connection attempt.
 */
export const claimPort = (host: string, port: number) =>
  Effect.gen(function*() {
    const taken = (by: string) =>
      Effect.fail(
        new Error(
          `Cannot serve on ${host}:${port} (HOST, PORT): ${by} port ${port}; stop it first, or choose another PORT`
        )
      )
    // Abstract sockets are Linux's; elsewhere only the connection attempt below stands.
    if (process.platform === "linux") {
      yield* Effect.acquireRelease(
        Effect.try({
          try: () =>
            Bun.listen({ unix: `\0petstore:${port}`, socket: { open: (socket) => void socket.end(), data: () => {} } }),
          catch: (cause) => cause as Error & { readonly code?: string }
        }),
        (claim) => Effect.sync(() => claim.stop(true))
      ).pipe(Effect.catch((cause) =>
        cause.code === "EADDRINUSE"
          ? taken("another Pet Store service already serves")
          // Unix sockets forbidden (systemd's RestrictAddressFamilies): the service runs, unguarded against its kind.
          : Effect.logWarning(`cannot claim port ${port} for this service alone: ${cause.message}`)
      ))
    }
    if (yield* accepts(host, port)) return yield* taken("another process already accepts connections on")
  })
