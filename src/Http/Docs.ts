import { Effect } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { HttpApiScalar, OpenApi } from "effect/http-api"
import { createHash } from "node:crypto"
import type { PetStoreApi } from "../Api.js"
import { docsPath, openApiPath, rootPath } from "../Api/DocumentPaths.js"
import { precompressed } from "./Precompressed.js"

/** Browsers and proxies may keep the page and the document this long, then revalidate by ETag. */
const docsCacheControl = "public, max-age=300"

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

const sha256 = (text: string) => `'sha256-${createHash("sha256").update(text).digest("base64")}'`

/** The page runs only its own inline scripts and calls only its servers ("Test request"); no framing, no referrer. */
const securityHeaders = (page: string, servers: ReadonlyArray<string>) => {
  const scripts = [...page.matchAll(/<script>([\s\S]*?)<\/script>/g)].map(([, script]) => sha256(script!))
  const origins = [...new Set(servers.map((url) => new URL(url).origin))]
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

const utf8 = (text: string) => new TextEncoder().encode(text)

/** `GET /docs`, `GET /v1/openapi.json` and `GET /` (to the page), built once at start and cacheable. */
export const DocsLive = (api: typeof PetStoreApi) =>
  HttpRouter.use((router) =>
    Effect.gen(function*() {
      const spec = OpenApi.fromApi(api)
      const page = yield* renderScalarPage(api)
      const servers = (spec.servers ?? []).map(({ url }) => url)
      yield* router.add(
        "GET",
        docsPath,
        yield* precompressed(utf8(page), "text/html; charset=utf-8", {
          "cache-control": docsCacheControl,
          ...securityHeaders(page, servers)
        })
      )
      yield* router.add(
        "GET",
        openApiPath,
        yield* precompressed(utf8(JSON.stringify(spec)), "application/json", { "cache-control": docsCacheControl })
      )
      yield* router.add("GET", rootPath, HttpServerResponse.redirect(docsPath, { status: 302 }))
    })
  )
