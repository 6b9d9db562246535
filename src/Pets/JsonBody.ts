import { Cause, Effect, Result, SchemaParser, Stream } from "effect"
import { HttpServerError, HttpServerRequest } from "effect/http"
import { BadRequest, PayloadTooLarge, UnsupportedMediaType } from "../Domain/ApiError.js"
import { describeIssue } from "../Domain/ParseIssues.js"
import { NewPet, newPetParseOptions } from "../Domain/Pet.js"

const maxBodyBytes = 64 * 1024

/** How deep arrays and objects may nest in a body: a NewPet is flat, and `JSON.parse` recurses once per level. */
const maxJsonDepth = 32

const badRequest = (code: BadRequest["code"], message: string) => new BadRequest({ code, message, status: 400 })
const tooDeep = badRequest(
  "validation_failed",
  `body: must not nest arrays or objects more than ${maxJsonDepth} levels deep`
)
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

/** A body cut short: its client closed the connection, so the request ends as aborted (499), not as a failure. */
const clientClosed = Effect.failCause(Cause.annotate(Cause.interrupt(), HttpServerError.ClientAbort.annotation))

/** The body's text, refused once past the limit without reading the rest. */
const readText = (request: HttpServerRequest.HttpServerRequest) => {
  const declared = request.headers["content-length"]
  if (declared !== undefined) {
    // Checked before a byte is read; the runtime then reads the body at once.
    if (Number(declared) > maxBodyBytes) return Effect.fail(tooLarge)
    return Effect.catchDefect(Effect.promise(() => (request.source as Request).text()), () => clientClosed)
  }
  // Neither a length nor chunks is an empty body, whose stream would fail as if the client had gone.
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

const decodeNewPet = SchemaParser.decodeUnknownResult(NewPet, { ...newPetParseOptions, errors: "first" })

/** 415 unless JSON, 413 past 64 KiB, 400 unless a NewPet; not HttpApi's decoding (its own 415 body, any depth parsed). */
export const readNewPet = Effect.flatMap(
  HttpServerRequest.HttpServerRequest,
  (request): Effect.Effect<NewPet, UnsupportedMediaType | PayloadTooLarge | BadRequest> => {
    const contentType = request.headers["content-type"]
    if (contentType === undefined || !/^application\/json\s*(;|$)/i.test(contentType.trim())) {
      return Effect.fail(unsupportedMediaType)
    }
    return Effect.flatMap(readText(request), (text) => {
      if (nestsDeeperThan(text, maxJsonDepth)) return Effect.fail(tooDeep)
      let json: unknown
      try {
        json = JSON.parse(text)
      } catch {
        const message = text.trim() === "" ? "body: is empty; a JSON object is required" : "body: is not valid JSON"
        return Effect.fail(badRequest("malformed_json", message))
      }
      const decoded = decodeNewPet(json)
      return Result.isSuccess(decoded)
        ? Effect.succeed(decoded.success)
        : Effect.fail(badRequest("validation_failed", describeIssue(decoded.failure, "body", json)))
    })
  }
)

/** Whether `text` nests arrays or objects deeper than `max`, in one pass (brackets in strings skipped). */
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
