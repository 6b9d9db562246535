import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect } from "effect"
import { HttpServer } from "effect/http"
import type { NetAddress } from "effect/net"
import { createHash } from "node:crypto"
import { brotliDecompressSync, gunzipSync } from "node:zlib"
import { AppConfig } from "../src/Config/AppConfig.js"
import { chooseEncoding } from "../src/Http/Docs.js"
import { createKey, send, TestServer } from "./support/TestServer.js"

/**
 * A request sent by hand, the body read as it came over the wire (Bun's fetch would decompress
 * it); on the live clock, as fetch waits on the server's real I/O.
 */
const raw = (path: string, headers: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const address = (yield* HttpServer.HttpServer).address as NetAddress.InetAddress
    return yield* Effect.promise(async () => {
      const response = await fetch(`http://127.0.0.1:${address.port}${path}`, {
        headers,
        decompress: false,
        redirect: "manual"
      })
      return { status: response.status, headers: response.headers, body: new Uint8Array(await response.arrayBuffer()) }
    })
  })

const served = ["/docs", "/v1/openapi.json"] as const

describe("the docs page and the OpenAPI document", () => {
  it.live("are sent compressed as the client accepts: br, gzip, or as they are", () =>
    Effect.gen(function*() {
      for (const path of served) {
        const plain = yield* raw(path)
        expect(plain.status, path).toBe(200)
        expect(plain.headers.get("content-encoding"), path).toBeNull()
        expect(plain.headers.get("vary"), path).toBe("Accept-Encoding")

        const br = yield* raw(path, { "accept-encoding": "gzip, deflate, br" })
        expect(br.headers.get("content-encoding"), path).toBe("br")
        expect(brotliDecompressSync(br.body).equals(plain.body), path).toBe(true)

        const gzip = yield* raw(path, { "accept-encoding": "gzip" })
        expect(gzip.headers.get("content-encoding"), path).toBe("gzip")
        expect(gunzipSync(gzip.body).equals(plain.body), path).toBe(true)

        // br refused by weight: gzip.
        const noBr = yield* raw(path, { "accept-encoding": "br;q=0, gzip;q=0.5" })
        expect(noBr.headers.get("content-encoding"), path).toBe("gzip")
        expect(gzip.body.length, path).toBeLessThan(plain.body.length / 2)
      }
      // The 3.3 MB page goes over the wire in under a megabyte.
      expect((yield* raw("/docs", { "accept-encoding": "br" })).body.length).toBeLessThan(1_000_000)
    }).pipe(Effect.provide(TestServer)))

  it.live("carry an ETag per encoding, and a request naming it gets 304 without a body", () =>
    Effect.gen(function*() {
      for (const path of served) {
        const tags = new Set<string>()
        for (const encoding of ["br", "gzip", "identity"]) {
          const first = yield* raw(path, { "accept-encoding": encoding })
          const etag = first.headers.get("etag")!
          expect(etag, path).toMatch(/^"[\w-]+"$/)
          tags.add(etag)
          const again = yield* raw(path, { "accept-encoding": encoding, "if-none-match": etag })
          expect(again.status, `${path} ${encoding}`).toBe(304)
          expect(again.body.length).toBe(0)
          expect(again.headers.get("etag")).toBe(etag)
          expect(again.headers.get("cache-control")).toBe("public, max-age=300")
          // A weak comparison, and a list of tags, match too.
          expect((yield* raw(path, { "accept-encoding": encoding, "if-none-match": `"other", W/${etag}` })).status)
            .toBe(304)
          expect((yield* raw(path, { "accept-encoding": encoding, "if-none-match": `"other"` })).status).toBe(200)
        }
        expect(tags.size, path).toBe(3)
      }
    }).pipe(Effect.provide(TestServer)))

  it.live("may be cached publicly for five minutes, while the API's answers stay no-store", () =>
    Effect.gen(function*() {
      for (const path of served) {
        const response = yield* send("GET", path)
        expect(response.headers["cache-control"], path).toBe("public, max-age=300")
        expect(response.headers["x-content-type-options"], path).toBe("nosniff")
        expect(response.headers["x-request-id"], path).toBeDefined()
      }
      const { key } = yield* createKey()
      for (const response of [yield* send("GET", "/v1/pets", { key }), yield* send("GET", "/v1/pets")]) {
        expect(response.headers["cache-control"]).toBe("no-store")
      }
      expect((yield* raw("/")).headers.get("cache-control")).toBe("no-store")
    }).pipe(Effect.provide(TestServer)))

  it.effect("the page may not be framed, sends no referrer, and runs only its own inline scripts", () =>
    Effect.gen(function*() {
      const page = yield* send("GET", "/docs")
      expect(page.headers["x-frame-options"]).toBe("DENY")
      expect(page.headers["referrer-policy"]).toBe("no-referrer")
      const policy = Object.fromEntries(
        page.headers["content-security-policy"]!.split(";").map((d: string) => d.trim().split(" ")).map((
          [name, ...values]
        ) => [name, values])
      )
      expect(policy["frame-ancestors"]).toEqual(["'none'"])
      expect(policy["default-src"]).toEqual(["'none'"])
      const scripts = [...page.text.matchAll(/<script>([\s\S]*?)<\/script>/g)].map(([, script]) =>
        `'sha256-${createHash("sha256").update(script!).digest("base64")}'`
      )
      expect(scripts.length).toBeGreaterThan(0)
      // WebAssembly may be compiled (the viewer needs it), JavaScript never evaluated from a string.
      expect(policy["script-src"]).toEqual([...scripts, "'wasm-unsafe-eval'"])
      // The sample requests may reach every listed server, and nothing else.
      expect(policy["connect-src"]).toEqual(["'self'", "http://petstore.test", "https://petstore.example.com"])
      // No source map on a CDN that this origin does not serve.
      expect(page.text).not.toContain("sourceMappingURL=/sm/")
      // The document carries no page policy, only its caching.
      expect((yield* send("GET", "/v1/openapi.json")).headers["content-security-policy"]).toBeUndefined()
    }).pipe(Effect.provide(TestServer)))

  it.live("GET / redirects to /docs", () =>
    Effect.gen(function*() {
      const response = yield* raw("/")
      expect(response.status).toBe(302)
      expect(response.headers.get("location")).toBe("/docs")
      const post = yield* send("POST", "/", { body: "{}" })
      expect(post.status).toBe(405)
      expect(post.headers["allow"]).toBe("GET")
    }).pipe(Effect.provide(TestServer)))

  it("Accept-Encoding is read with its weights; br wins a tie", () => {
    expect(chooseEncoding(undefined)).toBe("identity")
    expect(chooseEncoding("")).toBe("identity")
    expect(chooseEncoding("gzip, deflate, br, zstd")).toBe("br")
    expect(chooseEncoding("GZIP")).toBe("gzip")
    expect(chooseEncoding("br;q=0.5, gzip")).toBe("gzip")
    expect(chooseEncoding("br;q=0, gzip;q=0")).toBe("identity")
    expect(chooseEncoding("*")).toBe("br")
    expect(chooseEncoding("*;q=0.1, br;q=0")).toBe("gzip")
    expect(chooseEncoding("deflate, identity")).toBe("identity")
  })
})

describe("the OpenAPI servers", () => {
  const serversFrom = (env: Record<string, string>) =>
    Effect.map(AppConfig.config, ({ servers }) => servers).pipe(
      Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env }))
    )

  it.effect("put this instance (PUBLIC_BASE_URL) first, labelled with its environment, then the other environment", () =>
    Effect.gen(function*() {
      expect(yield* serversFrom({ PUBLIC_BASE_URL: "https://staging-7.internal/" })).toEqual([
        { url: "https://staging-7.internal", description: "This instance (staging)" },
        { url: "https://petstore.example.com", description: "Production" }
      ])
      expect(
        yield* serversFrom({
          PETSTORE_ENV: "production",
          PUBLIC_BASE_URL: "https://eu.petstore.example.com",
          PETSTORE_STAGING_URL: "https://staging.example.org"
        })
      ).toEqual([
        { url: "https://eu.petstore.example.com", description: "This instance (production)" },
        { url: "https://staging.example.org", description: "Staging" }
      ])
      expect(yield* serversFrom({ PORT: "8080" })).toEqual([
        { url: "http://localhost:8080", description: "This instance (staging)" },
        { url: "https://petstore.example.com", description: "Production" }
      ])
    }))
})
