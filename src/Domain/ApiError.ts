import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"

/**
 * Every error of the service answers with the interface's Error body: exactly `code`, `message`
 * and `status`. Each HTTP status has one tagged error carrying the codes it may use; on the wire
 * the tag is dropped (see `ErrorBody`), so clients see only the three fields.
 */
const errorFields = <const Codes extends readonly [string, ...Array<string>], const Status extends number>(
  status: Status,
  codes: Codes
) => ({
  code: Schema.Literal(...codes).annotations({ description: "Machine-readable error code.", examples: [codes[0]] }),
  message: Schema.String.annotations({
    description: "Human-readable description, naming the offending field or parameter and the rule it broke.",
    examples: ["name: must be a string of 1 to 255 characters"]
  }),
  status: Schema.Literal(status).annotations({ description: "The HTTP status code of the response.", examples: [status] })
})

export class BadRequest extends Schema.TaggedError<BadRequest>()(
  "BadRequest",
  errorFields(400, ["validation_failed", "malformed_json", "invalid_parameter", "invalid_cursor"])
) {}

export class Unauthorized extends Schema.TaggedError<Unauthorized>()(
  "Unauthorized",
  errorFields(401, ["missing_api_key", "invalid_api_key"])
) {}

export class NotFound extends Schema.TaggedError<NotFound>()(
  "NotFound",
  errorFields(404, ["pet_not_found", "route_not_found"])
) {}

export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()(
  "MethodNotAllowed",
  errorFields(405, ["method_not_allowed"])
) {}

export class Conflict extends Schema.TaggedError<Conflict>()(
  "Conflict",
  errorFields(409, ["idempotency_request_in_progress"])
) {}

export class Gone extends Schema.TaggedError<Gone>()(
  "Gone",
  errorFields(410, ["endpoint_removed"])
) {}

export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()(
  "PayloadTooLarge",
  errorFields(413, ["payload_too_large"])
) {}

export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()(
  "UnsupportedMediaType",
  errorFields(415, ["unsupported_media_type"])
) {}

export class UnprocessableContent extends Schema.TaggedError<UnprocessableContent>()(
  "UnprocessableContent",
  errorFields(422, ["idempotency_key_reused"])
) {}

export class TooManyRequests extends Schema.TaggedError<TooManyRequests>()(
  "TooManyRequests",
  errorFields(429, ["rate_limited"])
) {}

export class InternalError extends Schema.TaggedError<InternalError>()(
  "InternalError",
  errorFields(500, ["internal_error"])
) {}

export class ServiceUnavailable extends Schema.TaggedError<ServiceUnavailable>()(
  "ServiceUnavailable",
  errorFields(503, ["database_unavailable", "request_timeout", "shutting_down", "read_only"])
) {}

/** A tagged error class of this file: its schema, tag and fields (`_tag`, `code`, `message`, `status`). */
type ErrorClass<A, I extends { readonly _tag: Tag }, Tag extends string, Fields extends Schema.Struct.Fields> =
  & Schema.Schema<A, I>
  & { readonly _tag: Tag; readonly fields: Fields }

/** The wire form of a tagged error: the Error body without the tag, with its HTTP status. */
export const ErrorBody = <A, I extends { readonly _tag: Tag }, Tag extends string, Fields extends Schema.Struct.Fields>(
  error: ErrorClass<A, I, Tag, Fields>,
  description: string
) => {
  const { _tag: _, ...fields } = error.fields
  const status = ((error.fields as Schema.Struct.Fields).status as Schema.Literal<[number]>).literals[0]
  return Schema.transform(
    Schema.Struct(fields).annotations({ identifier: `${error._tag}Error`, description }),
    error,
    {
      strict: false,
      decode: (body) => ({ ...body, _tag: error._tag }),
      encode: ({ _tag, ...body }) => body
    }
  ).annotations(HttpApiSchema.annotations({ status, description }))
}

export const BadRequestBody = ErrorBody(BadRequest, "The request has an invalid body, parameter or cursor.")
export const UnauthorizedBody = ErrorBody(Unauthorized, "The API key is missing, malformed, unknown or revoked.")
export const NotFoundBody = ErrorBody(NotFound, "Nothing is found at this address.")
export const MethodNotAllowedBody = ErrorBody(MethodNotAllowed, "The path exists but not with this method.")
export const ConflictBody = ErrorBody(Conflict, "A request with this Idempotency-Key is still being processed.")
export const UnprocessableContentBody = ErrorBody(
  UnprocessableContent,
  "This Idempotency-Key was used with a different request body."
)
export const GoneBody = ErrorBody(Gone, "The endpoint was removed at its announced sunset.")
export const PayloadTooLargeBody = ErrorBody(PayloadTooLarge, "The request body is larger than 64 KiB.")
export const UnsupportedMediaTypeBody = ErrorBody(UnsupportedMediaType, "The request body is not application/json.")
export const TooManyRequestsBody = ErrorBody(
  TooManyRequests,
  "Too many requests: the API key's rate, or failed authentications from this address; see Retry-After."
)
export const InternalErrorBody = ErrorBody(InternalError, "The service failed unexpectedly.")
export const ServiceUnavailableBody = ErrorBody(
  ServiceUnavailable,
  "The database does not answer, the request ran past the instance's deadline, the instance is shutting down, or " +
    "writes are stopped for a move of the database (read_only); see Retry-After."
)

/** The wire form of every error the service answers with, by tag. */
export const errorBodies = {
  BadRequest: BadRequestBody,
  Unauthorized: UnauthorizedBody,
  NotFound: NotFoundBody,
  MethodNotAllowed: MethodNotAllowedBody,
  Conflict: ConflictBody,
  Gone: GoneBody,
  PayloadTooLarge: PayloadTooLargeBody,
  UnsupportedMediaType: UnsupportedMediaTypeBody,
  UnprocessableContent: UnprocessableContentBody,
  TooManyRequests: TooManyRequestsBody,
  InternalError: InternalErrorBody,
  ServiceUnavailable: ServiceUnavailableBody
} as const

/** Every error the service answers with. */
export type ApiError =
  | BadRequest
  | Unauthorized
  | NotFound
  | MethodNotAllowed
  | Conflict
  | Gone
  | PayloadTooLarge
  | UnsupportedMediaType
  | UnprocessableContent
  | TooManyRequests
  | InternalError
  | ServiceUnavailable
