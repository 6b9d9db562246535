import { Effect, Fiber } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiScalar, OpenApi } from "effect/http-api"
import { createHash } from "node:crypto"
import { promisify } from "node:util"
import { brotliCompress, constants, gzip } from "node:zlib"
import type { PetStoreApi } from "../Api.js"
import { docsPath, openApiPath, rootPath } from "../Api/DocumentPaths.js"

/** The viewer wants `#tag/pets/GET/v1/pets`, getPet's `Link` gave out lower case: respelled before it reads it. */
const respellFragment =
  "<script>if (/^#tag[/][^/]+[/][a-z]+[/]/.test(location.hash)) history.replaceState(null, \"\", " +
  "location.hash.replace(/^(#tag[/][^/]+[/])([a-z]+)[/]/, (_, tag, method) => tag + method.toUpperCase() + \"/\"))</script>"

/** Scalar's page, rendered once through its own route; with the system's fonts it needs no network. */
const renderScalarPage = (api: typeof PetStoreApi) =>
  Effect.promise(async () => {
    const { dispose, handler } = HttpRouter.toWebHandler(
      HttpApiScalar.layer(api, { path: docsPath, scalar: { withDefaultFonts: false } }),
      { disableLogger: true }
    )
    try {
      const page = await (await handler(new Request(`http://localhost${docsPath}`))).text()
      // The viewer's script names a source map on its CDN, which this origin does not serve.
      return page.replace(/\n\/\/# sourceMappingURL=\/sm\/[0-9a-f]+\.map/, "")
        .replace("<body>", `<body>\n    ${respellFragment}`)
    } finally {
      await dispose()
    }
  })

/** The page runs only its own inline scripts and calls only its servers ("Test request"); no framing, no referrer. */
const securityHeaders = (page: string, servers: ReadonlyArray<{ readonly url: string }>) => {
  const scripts = [...page.matchAll(/<script>([\s\S]*?)<\/script>/g)].map(([, script]) =>
    `'sha256-${createHash("sha256").update(script!).digest("base64")}'`
  )
  const origins = [...new Set(servers.map(({ url }) => new URL(url).origin))]
  return {
    "content-security-policy": [
      "default-src 'none'",
      // Scalar instantiates WebAssembly; that allows no JavaScript eval.
      `script-src ${scripts.join(" ")} 'wasm-unsafe-eval'`,
      "style-src 'unsafe-inline'",
      "img-src 'self' data:",
      "font-src 'self' data:",
      `connect-src 'self' ${origins.join(" ")}`,
      "base-uri 'none'",
      "form-action 'none'",
      "frame-ancestors 'none'"
    ].join("; "),
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY"
  }
}

type Encoding = "br" | "gzip" | "identity"

/** The encoding for `Accept-Encoding` (RFC 9110 §12.5.3): br or gzip by weight, br on a tie, else none. */
export const chooseEncoding = (acceptEncoding: string | undefined): Encoding => {
  const weights = new Map<string, number>()
  for (const item of (acceptEncoding ?? "").toLowerCase().split(",")) {
    const weight = Number(/;\s*q=([^;]*)/.exec(item)?.[1] ?? 1)
    weights.set(item.split(";", 1)[0]!.trim(), Number.isFinite(weight) ? weight : 0)
  }
  const weightOf = (coding: string) => weights.get(coding) ?? weights.get("*") ?? 0
  const br = weightOf("br")
  const gz = Math.max(weightOf("gzip"), weights.get("x-gzip") ?? 0)
  return br > 0 && br >= gz ? "br" : gz > 0 ? "gzip" : "identity"
}

/** Compressed at start, an ETag per encoding and 304 (what `HttpMiddleware.compression` lacks); cached five minutes. */
const precompressed = (text: string, contentType: string, headers: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const body = new TextEncoder().encode(text)
    const digest = createHash("sha256").update(body).digest("base64url").slice(0, 27)
    const representation = (encoding: Encoding, encoded: Uint8Array) => {
      // Each encoding is its own representation, so it has its own strong tag.
      const etag = encoding === "identity" ? `"${digest}"` : `"${digest}-${encoding}"`
      const validators = { "cache-control": "public, max-age=300", ...headers, etag, vary: "Accept-Encoding" }
      return {
        etag,
        ok: HttpServerResponse.uint8Array(encoded, {
          contentType,
          headers: encoding === "identity" ? validators : { ...validators, "content-encoding": encoding }
        }),
        notModified: HttpServerResponse.empty({ status: 304, headers: validators })
      }
    }
    const compressing = yield* Effect.forkScoped(Effect.promise(() =>
      Promise.all([
        // Quality 5 beats gzip by a tenth in about its time; 11 would take seconds of CPU at every start.
        promisify(brotliCompress)(body, {
          params: { [constants.BROTLI_PARAM_QUALITY]: 5, [constants.BROTLI_PARAM_SIZE_HINT]: body.byteLength }
        }),
        promisify(gzip)(body, { level: 9 })
      ]).then(([br, gz]) => ({
        br: representation("br", br),
        gzip: representation("gzip", gz),
        identity: representation("identity", body)
      }))
    ))
    // The handler is the result: an effect each request runs.
    // @effect-diagnostics-next-line returnEffectInGen:off
    return Effect.flatMap(
      HttpServerRequest.HttpServerRequest,
      (request) =>
        Effect.map(Fiber.join(compressing), (representations) => {
          const { etag, notModified, ok } = representations[chooseEncoding(request.headers["accept-encoding"])]
          // `If-None-Match` compares weakly (RFC 9110 §13.1.2).
          const tags = request.headers["if-none-match"]?.split(",").map((tag) => tag.trim()) ?? []
          return tags.some((tag) => tag === "*" || tag.replace(/^W\//, "") === etag) ? notModified : ok
        })
    )
  })

/** `GET /docs`, `GET /v1/openapi.json` and `GET /` (to the page), built once at start and cacheable. */
export const DocsLive = (api: typeof PetStoreApi) =>
  HttpRouter.use((router) =>
    Effect.gen(function*() {
      const spec = OpenApi.fromApi(api)
      const page = yield* renderScalarPage(api)
      const headers = securityHeaders(page, spec.servers ?? [])
      yield* router.add("GET", docsPath, yield* precompressed(page, "text/html; charset=utf-8", headers))
      yield* router.add("GET", openApiPath, yield* precompressed(JSON.stringify(spec), "application/json"))
      yield* router.add("GET", rootPath, HttpServerResponse.redirect(docsPath, { status: 302 }))
    })
  )
