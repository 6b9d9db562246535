import { HttpServerRequest } from "@effect/platform"
import { clientAbortFiberId } from "@effect/platform/HttpServerError"
import { Cause, Effect, Option, ParseResult, Schema, Stream } from "effect"
import { BadRequest, PayloadTooLarge, UnsupportedMediaType } from "../Domain/ApiError.js"
import { describeIssues } from "./ParseIssues.js"

export const maxBodyBytes = 64 * 1024

/** How deep arrays and objects may nest in a body: a NewPet is flat, and `JSON.parse` recurses once per level. */
export const maxJsonDepth = 32

const tooLarge = new PayloadTooLarge({
  code: "payload_too_large",
  message: `body: must be at most ${maxBodyBytes} bytes`,
  status: 413
})

const isJson = (contentType: string | undefined) =>
  contentType !== undefined && /^application\/json\s*(;|$)/i.test(contentType.trim())

/** The body's bytes, refused once past the limit without reading the rest. */
const readText = (request: HttpServerRequest.HttpServerRequest) => {
  const declared = request.headers["content-length"]
  if (declared !== undefined) {
    // A declared length is checked before a byte is read.
    if (Number(declared) > maxBodyBytes) return Effect.fail(tooLarge)
    // Bun's own Request reads the body directly; the platform's wrapper caches it through a fiber.
    return request.source instanceof Request
      ? Effect.catchAllDefect(Effect.promise(() => (request.source as Request).text()), () => clientClosed)
      : Effect.catchAll(request.text, () => clientClosed)
  }
  return request.stream.pipe(
    Stream.runFoldEffect({ size: 0, chunks: [] as Array<Uint8Array> }, (read, chunk) => {
      if (read.size + chunk.length > maxBodyBytes) return Effect.fail(tooLarge)
      read.chunks.push(chunk)
      return Effect.succeed({ size: read.size + chunk.length, chunks: read.chunks })
    }),
    Effect.map(({ chunks }) => Buffer.concat(chunks).toString("utf8")),
    Effect.catchTag("RequestError", () => clientClosed)
  )
}

/**
 * A body that stopped before its end: its client closed the connection, so the request ends as if
 * the client had aborted it (logged 499, never answered), not as a failure of the service.
 */
const clientClosed = Effect.failCause(Cause.interrupt(clientAbortFiberId))

/**
 * Reads a JSON request body and decodes it with `schema`: 415 unless it is `application/json`,
 * 413 past 64 KiB, 400 `malformed_json` when it does not parse, 400 `validation_failed` when it
 * breaks the schema.
 */
export const readJsonBody = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknown(schema, { errors: "first" })
  return Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (!isJson(request.headers["content-type"])) {
      return yield* new UnsupportedMediaType({
        code: "unsupported_media_type",
        message: "Content-Type: must be application/json",
        status: 415
      })
    }
    const text = yield* readText(request)
    if (nestsDeeperThan(text, maxJsonDepth)) {
      return yield* new BadRequest({
        code: "validation_failed",
        message: `body: must not nest arrays or objects more than ${maxJsonDepth} levels deep`,
        status: 400
      })
    }
    const json = parseJson(text)
    if (Option.isNone(json)) {
      return yield* new BadRequest({
        code: "malformed_json",
        message: text.trim() === "" ? "body: is empty; a JSON object is required" : "body: is not valid JSON",
        status: 400
      })
    }
    return yield* decode(json.value).pipe(
      Effect.mapError((error) =>
        new BadRequest({
          code: "validation_failed",
          message: describeIssues(ParseResult.ArrayFormatter.formatErrorSync(error), "body"),
          status: 400
        })
      )
    )
  })
}

/**
 * Whether `text` opens more than `max` arrays or objects inside one another, found in one pass
 * over its characters (brackets inside strings skipped), so that no parser recurses that deep.
 */
const nestsDeeperThan = (text: string, max: number): boolean => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++ // a backslash escapes the next character
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true
    } else if (c === 0x5d || c === 0x7d) depth--
  }
  return false
}

const parseJson = (text: string): Option.Option<unknown> => {
  try {
    return Option.some(JSON.parse(text))
  } catch {
    return Option.none()
  }
}
