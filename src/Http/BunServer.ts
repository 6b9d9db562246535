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

/**
 * The HTTP server on Bun, in the shape of effect-smol's `@effect/platform-bun` `BunHttpServer.ts`
 * (which has no release that loads on effect 4.1.0): `Bun.serve` answering each request through
 * Effect's own web handling (`HttpEffect.toHandled` and `HttpServerResponse.toWeb`, what
 * `HttpRouter.toWebHandler` runs), as an `HttpServer` service whose scope starts and stops it.
 * Only what this service uses: no WebSockets, no multipart, no files.
 */
/** Where a request's web response goes: the promise `Bun.serve` awaits, carried in the request's context. */
class Respond extends Context.Service<Respond, (response: Response) => void>()("petstore/BunServer/Respond") {}

export interface ServeOptions {
  readonly port: number
  readonly hostname: string
  /** Workers share the port: the kernel spreads connections over them (SO_REUSEPORT). */
  readonly reusePort?: boolean | undefined
}

/**
 * The server's listening socket, closed by a graceful stop before the scope ends: no new
 * connection is accepted, the idle ones close at once and the others after their answer.
 */
export class Listener extends Context.Service<Listener, { readonly close: Effect.Effect<void> }>()(
  "petstore/BunServer/Listener"
) {}

/**
 * Starts `Bun.serve` and stops it when the scope closes: the listener closes (if the stop has not
 * closed it already), the connections get half a second to close by themselves, and what is left
 * is cut. By then the requests in flight were let finish (`Http/InFlightRequests.ts`), and a
 * connection kept open by a client must not hold the process past its stop's bound.
 */
export const make = (options: ServeOptions) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const handlers: Array<(request: Request, server: BunServer<undefined>) => Response | Promise<Response>> = [
      () => new Response(null, { status: 503, headers: { connection: "close" } })
    ]
    const server = Bun.serve({
      port: options.port,
      hostname: options.hostname,
      reusePort: options.reusePort ?? false,
      development: false,
      fetch: (request, server) => handlers[handlers.length - 1]!(request, server)
    })
    // Resolves once every connection is closed.
    let closed: Promise<void> | undefined
    const closeListener = () => (closed ??= server.stop(false))
    yield* Scope.addFinalizer(
      scope,
      // The answers just given are let leave before what is left is cut: closing a connection while
      // its response is written resets it. Interruptible, so that the bound can end the wait: a
      // finalizer runs uninterruptibly.
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
              Context.getUnsafe(fiber.context, Respond)(toWeb(request, response, services))
              return Effect.void
            }), middleware)

          const handler = (source: Request, bun: BunServer<undefined>) =>
            new Promise<Response>((resolve) => {
              const request = HttpServerRequest.fromWeb(source).modify({
                remoteAddress: Option.fromNullishOr(bun.requestIP(source)?.address)
              })
              // Added over the server's context rather than copied into a map of its own: the
              // request's fiber then keeps the cache of references the server's context built.
              const context = Context.add(
                Context.add(services, HttpServerRequest.HttpServerRequest, request),
                Respond,
                resolve
              )
              const fiber = Effect.runForkWith(context)(httpEffect)
              // Answered already (a request that waited for nothing): no client can have gone
              // away meanwhile, and Bun makes a request's abort signal only when asked for it.
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
  })

/** Where the server listens; a host named rather than given as an address (`localhost`) as the loopback. */
const addressOf = (hostname: string, port: number) =>
  NetAddress.inetAddressUnsafe(Result.getOrElse(NetAddress.ipFromString(hostname), () => NetAddress.ipv4Loopback), port)

const toWeb = (
  request: HttpServerRequest.HttpServerRequest,
  response: HttpServerResponse.HttpServerResponse,
  context: Context.Context<never>
): Response => {
  const withoutBody = request.method === "HEAD"
  return HttpServerResponse.toWeb(withoutBody ? response : HttpEffect.scopeTransferToStream(response), {
    withoutBody,
    context,
    // Only a streamed body reads it; asking makes it.
    signal: response.body._tag === "Stream" ? (request.source as Request).signal : undefined
  })
}

/** The server, listening as `options` say, and its listener. */
export const layer = (options: ServeOptions): Layer.Layer<HttpServer.HttpServer | Listener> =>
  Layer.effectContext(make(options))

/** A server on a free loopback port, and an `HttpClient` that calls it (for tests). */
export const layerTest = HttpServer.layerTestClient.pipe(
  Layer.provide(FetchHttpClient.layer.pipe(
    Layer.provide(Layer.succeed(FetchHttpClient.RequestInit, { keepalive: false }))
  )),
  Layer.provideMerge(layer({ port: 0, hostname: "127.0.0.1" }))
)
