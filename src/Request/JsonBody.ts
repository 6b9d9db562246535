import { Cause, Effect, Result, type Schema, type SchemaAST, SchemaParser, Stream } from "effect"
import { HttpServerError, HttpServerRequest } from "effect/http"
import { BadRequest, PayloadTooLarge, UnsupportedMediaType } from "../Domain/ApiError.js"
import { describeIssue } from "./ParseIssues.js"

export const maxBodyBytes = 64 * 1024

/** How deep arrays and objects may nest in a body: a NewPet is flat, and `JSON.parse` recurses once per level. */
export const maxJsonDepth = 32

const tooLarge = new PayloadTooLarge({
  code: "payload_too_large",
  message: `body: must be at most ${maxBodyBytes} bytes`,
  status: 413
})

const unsupportedMediaType = new UnsupportedMediaType({
  code: "unsupported_media_type",
  message: "Content-Type: must be application/json",
  status: 415
})

const tooDeep = new BadRequest({
  code: "validation_failed",
  message: `body: must not nest arrays or objects more than ${maxJsonDepth} levels deep`,
  status: 400
})

const isJson = (contentType: string | undefined) =>
  contentType !== undefined && /^application\/json\s*(;|$)/i.test(contentType.trim())

/**
 * A body that stopped before its end: its client closed the connection, so the request ends as if
 * the client had aborted it (logged 499, never answered), not as a failure of the service.
 */
const clientClosed = Effect.failCause(Cause.annotate(Cause.interrupt(), HttpServerError.ClientAbort.annotation))

/** The body's bytes, refused once past the limit without reading the rest. */
const readText = (request: HttpServerRequest.HttpServerRequest) => {
  const declared = request.headers["content-length"]
  if (declared !== undefined) {
    // A declared length is checked before a byte is read, and the body read by the runtime at once.
    if (Number(declared) > maxBodyBytes) return Effect.fail(tooLarge)
    return Effect.catchDefect(Effect.promise(() => (request.source as Request).text()), () => clientClosed)
  }
  // Neither a length nor chunks is an empty body (HTTP/1.1), which the runtime gives as no body at
  // all: its stream would fail and be taken for a client gone away.
  if ((request.source as Request).body === null) return Effect.succeed("")
  return request.stream.pipe(
    Stream.runFoldEffect(() => ({ size: 0, chunks: [] as Array<Uint8Array> }), (read, chunk: Uint8Array) => {
      if (read.size + chunk.length > maxBodyBytes) return Effect.fail(tooLarge)
      read.chunks.push(chunk)
      return Effect.succeed({ size: read.size + chunk.length, chunks: read.chunks })
    }),
    Effect.map(({ chunks }) => Buffer.concat(chunks).toString("utf8")),
    Effect.catchTag("HttpServerError", () => clientClosed)
  )
}

/**
 * Reads a JSON request body and decodes it with `schema` (with `options`, such as refusing
 * properties it does not name): 415 unless it is `application/json`, 413 past 64 KiB, 400
 * `malformed_json` when it does not parse, 400 `validation_failed` when it breaks the schema.
 * Here rather than HttpApi's payload decoding, which answers an unsupported media type with a
 * body of its own and cannot bound a body by its depth before parsing it.
 */
export const readJsonBody = <S extends Schema.ConstraintDecoder<unknown>>(
  schema: S,
  options?: SchemaAST.ParseOptions
) => {
  const decode = SchemaParser.decodeUnknownResult(schema, { ...options, errors: "first" })
  return Effect.flatMap(
    HttpServerRequest.HttpServerRequest,
    (request): Effect.Effect<S["Type"], UnsupportedMediaType | PayloadTooLarge | BadRequest> => {
      if (!isJson(request.headers["content-type"])) return Effect.fail(unsupportedMediaType)
      return Effect.flatMap(readText(request), (text) => {
        if (nestsDeeperThan(text, maxJsonDepth)) return Effect.fail(tooDeep)
        let json: unknown
        try {
          json = JSON.parse(text)
        } catch {
          return Effect.fail(
            new BadRequest({
              code: "malformed_json",
              message: text.trim() === "" ? "body: is empty; a JSON object is required" : "body: is not valid JSON",
              status: 400
            })
          )
        }
        const decoded = decode(json)
        return Result.isSuccess(decoded)
          ? Effect.succeed(decoded.success)
          : Effect.fail(
            new BadRequest({
              code: "validation_failed",
              message: describeIssue(decoded.failure, "body", json),
              status: 400
            })
          )
      })
    }
  )
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
