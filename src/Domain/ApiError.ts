import { Schema, SchemaAST, SchemaTransformation } from "effect"
import { HttpApiSchema } from "effect/http-api"

/** One of `codes`; a single code is its literal (a union of one reads as `anyOf` in the document). */
const oneOf = <const Codes extends readonly [string, ...Array<string>]>(codes: Codes): Schema.Codec<Codes[number]> =>
  codes.length === 1 ? Schema.Literal(codes[0]) : Schema.Literals(codes)

/** A tagged error per HTTP status, with the codes it may use; its wire body is exactly `code`, `message`, `status`. */
const ApiError =
  <Self>() =>
  <const Tag extends string, const Status extends number, const Codes extends readonly [string, ...Array<string>]>(
    tag: Tag,
    status: Status,
    codes: Codes
  ) =>
    Schema.TaggedError<Self>()(tag, {
      code: oneOf(codes).annotate({ description: "Machine-readable error code.", examples: [codes[0]] }),
      message: Schema.String.annotate({
        description: "Human-readable description, naming the offending field or parameter and the rule it broke.",
        examples: ["name: must be a string of 1 to 255 characters"]
      }),
      status: Schema.Literal(status).annotate({
        description: "The HTTP status code of the response.",
        examples: [status]
      })
    })

export class BadRequest extends ApiError<BadRequest>()(
  "BadRequest",
  400,
  ["validation_failed", "malformed_json", "invalid_parameter", "invalid_header", "invalid_cursor"]
) {}
export class Unauthorized
  extends ApiError<Unauthorized>()("Unauthorized", 401, ["missing_api_key", "invalid_api_key"])
{}
export class NotFound extends ApiError<NotFound>()("NotFound", 404, ["pet_not_found", "route_not_found"]) {}
export class MethodNotAllowed extends ApiError<MethodNotAllowed>()("MethodNotAllowed", 405, ["method_not_allowed"]) {}
export class Conflict extends ApiError<Conflict>()("Conflict", 409, ["idempotency_request_in_progress"]) {}
export class Gone extends ApiError<Gone>()("Gone", 410, ["endpoint_removed"]) {}
export class PayloadTooLarge extends ApiError<PayloadTooLarge>()("PayloadTooLarge", 413, ["payload_too_large"]) {}
export class UnsupportedMediaType
  extends ApiError<UnsupportedMediaType>()("UnsupportedMediaType", 415, ["unsupported_media_type"])
{}
export class UnprocessableContent
  extends ApiError<UnprocessableContent>()("UnprocessableContent", 422, ["idempotency_key_reused"])
{}
export class TooManyRequests extends ApiError<TooManyRequests>()("TooManyRequests", 429, ["rate_limited"]) {}
export class InternalError extends ApiError<InternalError>()("InternalError", 500, ["internal_error"]) {}
export class ServiceUnavailable extends ApiError<ServiceUnavailable>()(
  "ServiceUnavailable",
  503,
  ["database_unavailable", "database_read_only", "request_timeout", "shutting_down", "read_only"]
) {}

/** `Retry-After` by 503 code, so one code always asks for one wait (`/readyz`'s 503s carry none). */
export const retryAfterSeconds: { readonly [Code in ServiceUnavailable["code"]]: number } = {
  database_unavailable: 1,
  request_timeout: 1,
  shutting_down: 1,
  // A read-only database is a failover under way or an operator's choice: seconds to minutes.
  database_read_only: 5,
  // Writes stopped for a move: a million pets take about that long.
  read_only: 10
}

export const retryAfterHeader = (code: ServiceUnavailable["code"]) => ({
  "retry-after": String(retryAfterSeconds[code])
})

/** The codes an error of this file may carry, as its schema declares them. */
export const codesOf = <Code extends string>(
  error: { readonly fields: { readonly code: Schema.Codec<Code> } }
): ReadonlyArray<Code> => {
  const { ast } = error.fields.code
  return (SchemaAST.isUnion(ast) ? ast.types : [ast]).flatMap((member) =>
    SchemaAST.isLiteral(member) ? [member.literal as Code] : []
  )
}

/** The Error body without the tag, under its status; it decodes to the class, so clients get `instanceof NotFound`. */
const ErrorBody = <Self extends { readonly code: string; readonly message: string; readonly status: number }>(
  error: Schema.Codec<Self, unknown> & {
    new(body: Pick<Self, "code" | "message" | "status">): Self
    readonly identifier: string
    readonly fields: {
      readonly code: Schema.Codec<Self["code"]>
      readonly message: Schema.String
      readonly status: Schema.Literal<Self["status"]>
    }
  },
  description: string
) => {
  const { code, message, status } = error.fields
  const wire = Schema.Struct({ code, message, status }).annotate({
    identifier: `${error.identifier}Error`,
    description
  })
  return wire.pipe(
    Schema.decodeTo(
      Schema.toType(error),
      SchemaTransformation.transform<Self, typeof wire.Type>({
        decode: (body) => new error(body),
        encode: ({ code, message, status }) => ({ code, message, status })
      })
    ),
    HttpApiSchema.status(status.literal)
  ).annotate({ description })
}

/** The wire form of every error the service answers with, by tag: what endpoints declare. */
export const errorBodies = {
  BadRequest: ErrorBody(BadRequest, "The request has an invalid body, parameter or cursor."),
  Unauthorized: ErrorBody(Unauthorized, "The API key is missing, malformed, unknown or revoked."),
  NotFound: ErrorBody(NotFound, "Nothing is found at this address."),
  MethodNotAllowed: ErrorBody(MethodNotAllowed, "The path exists but not with this method."),
  Conflict: ErrorBody(Conflict, "A request with this Idempotency-Key is still being processed."),
  Gone: ErrorBody(Gone, "The endpoint was removed at its announced sunset."),
  PayloadTooLarge: ErrorBody(PayloadTooLarge, "The request body is larger than 64 KiB."),
  UnsupportedMediaType: ErrorBody(UnsupportedMediaType, "The request body is not application/json."),
  UnprocessableContent: ErrorBody(UnprocessableContent, "This Idempotency-Key was used with a different request body."),
  TooManyRequests: ErrorBody(
    TooManyRequests,
    "Too many requests: the API key's rate, or failed authentications from this address; see Retry-After."
  ),
  InternalError: ErrorBody(InternalError, "The service failed unexpectedly."),
  ServiceUnavailable: ErrorBody(
    ServiceUnavailable,
    "The database does not answer or is read-only (database_read_only: a standby, or writes turned off; reads are " +
      "served), the request ran past the instance's deadline, the instance is shutting down, or writes are stopped " +
      "for a move of the database (read_only); see Retry-After."
  )
} as const

export type ApiError = (typeof errorBodies)[keyof typeof errorBodies]["Type"]
