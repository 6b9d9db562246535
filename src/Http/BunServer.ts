import type { Server as BunServer } from "bun"
import { Context, Effect, Fiber, Layer, Option, Result, Scope } from "effect"
import {
  FetchHttpClient,
  HttpEffect,
  HttpServer,
  HttpServerError,
  HttpServerRequest,
  HttpServerResponse
} from "effect/http"
import { NetAddress } from "effect/net"

// Stand-in for `@effect/platform-bun`'s `BunHttpServer` (no release loads on effect 4.1.0), with what the service uses.

/** Where a request's web response goes: the promise `Bun.serve` awaits. */
class Respond extends Context.Service<Respond, (response: Response) => void>()("petstore/BunServer/Respond") {}

/** The listening socket, closed by a graceful stop: idle connections close at once, the others after their answer. */
export class Listener extends Context.Service<Listener, { readonly close: Effect.Effect<void> }>()(
  "petstore/BunServer/Listener"
) {}

/** The server and its listener; at the scope's end connections get half a second, then are cut: none holds a stop. */
export const layer = (
  options: { readonly port: number; readonly hostname: string; readonly reusePort?: boolean | undefined }
): Layer.Layer<HttpServer.HttpServer | Listener> =>
  Layer.effectContext(Effect.gen(function*() {
    const handlers: Array<(request: Request, server: BunServer<undefined>) => Response | Promise<Response>> = [
      () => new Response(null, { status: 503, headers: { connection: "close" } })
    ]
    const server = Bun.serve({
      port: options.port,
      hostname: options.hostname,
      // Workers share the port (SO_REUSEPORT).
      reusePort: options.reusePort ?? false,
      development: false,
      fetch: (request, server) => handlers[handlers.length - 1]!(request, server)
    })
    let closed: Promise<void> | undefined
    const closeListener = () => (closed ??= server.stop(false))
    yield* Effect.addFinalizer(() =>
      // Closing a connection mid-response resets it. Interruptible, or the bound could not end the wait.
      Effect.interruptible(Effect.promise(closeListener)).pipe(
        Effect.timeoutOption("500 millis"),
        Effect.andThen(
          Effect.interruptible(Effect.promise(() => server.stop(true))).pipe(Effect.timeoutOption("1 second"))
        )
      )
    )

    const listener = Listener.of({ close: Effect.sync(() => void closeListener()) })
    const httpServer = HttpServer.make({
      address: addressOf(server.hostname ?? options.hostname, server.port ?? options.port),
      serve: (httpApp, middleware) =>
        Effect.gen(function*() {
          const parent = yield* Effect.fiber
          const services = parent.context
          const serveScope = Context.getUnsafe(services, Scope.Scope)
          const requests = Scope.forkUnsafe(serveScope, "parallel")
          const httpEffect = HttpEffect.toHandled(httpApp, (request, response) =>
            Effect.withFiber((fiber) => {
              const withoutBody = request.method === "HEAD"
              const sent = withoutBody ? response : HttpEffect.scopeTransferToStream(response)
              Context.getUnsafe(fiber.context, Respond)(HttpServerResponse.toWeb(sent, {
                withoutBody,
                context: services,
                // Only a streamed body reads it; asking makes it.
                signal: response.body._tag === "Stream" ? (request.source as Request).signal : undefined
              }))
              return Effect.void
            }), middleware)

          const handler = (source: Request, bun: BunServer<undefined>) =>
            new Promise<Response>((resolve) => {
              const request = HttpServerRequest.fromWeb(source).modify({
                remoteAddress: Option.fromNullishOr(bun.requestIP(source)?.address)
              })
              // Added over the server's context, so the fiber keeps the references cache it built.
              const context = Context.add(services, HttpServerRequest.HttpServerRequest, request)
                .pipe(Context.add(Respond, resolve))
              const fiber = Effect.runForkWith(context)(httpEffect)
              // Answered already: Bun makes a request's abort signal only when asked for it.
              if (fiber.pollUnsafe() !== undefined) return
              Fiber.runIn(fiber, requests)
              // A client that goes away interrupts its request, marked as its doing (logged 499).
              source.signal.addEventListener("abort", () => {
                fiber.interruptUnsafe(parent.id, HttpServerError.ClientAbort.annotation)
              }, { once: true })
            })

          yield* Scope.addFinalizer(serveScope, Effect.sync(() => void handlers.pop()))
          handlers.push(handler)
        })
    })
    return Context.make(HttpServer.HttpServer, httpServer).pipe(Context.add(Listener, listener))
  }))

/** Where the server listens; a host named rather than given as an address (`localhost`) as the loopback. */
const addressOf = (hostname: string, port: number) =>
  NetAddress.inetAddressUnsafe(Result.getOrElse(NetAddress.ipFromString(hostname), () => NetAddress.ipv4Loopback), port)

/** A server on a free loopback port, and an `HttpClient` that calls it (for tests). */
export const layerTest = HttpServer.layerTestClient.pipe(
  Layer.provide(FetchHttpClient.layer.pipe(
    Layer.provide(Layer.succeed(FetchHttpClient.RequestInit, { keepalive: false }))
  )),
  Layer.provideMerge(layer({ port: 0, hostname: "127.0.0.1" }))
)
