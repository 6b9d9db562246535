import { SchemaIssue } from "effect"

/** The longest piece of a request an error message repeats: enough to recognise it, never the whole of it. */
const maxExcerpt = 64

/** `text` as an error message may quote it: at most `max` characters, cut ones marked with `…`. */
export const excerpt = (text: string, max: number = maxExcerpt): string =>
  text.length <= max ? text : `${text.slice(0, max)}…`

/** The first failure an issue holds: where, and the rule it broke when a schema words it. */
interface Failure {
  readonly path: ReadonlyArray<PropertyKey>
  readonly issue: SchemaIssue.Issue
  readonly message: string | undefined
}

const firstFailure = (
  issue: SchemaIssue.Issue,
  path: ReadonlyArray<PropertyKey>,
  message: string | undefined
): Failure => {
  switch (issue._tag) {
    case "Filter":
      return firstFailure(issue.issue, path, message ?? SchemaIssue.defaultCheckHook(issue))
    case "Encoding":
      return firstFailure(issue.issue, path, message)
    case "Pointer":
      return firstFailure(issue.issue, [...path, ...issue.path], message)
    case "Composite":
      return firstFailure(issue.issues[0], path, message)
    case "AnyOf":
      return issue.issues.length > 0 ? firstFailure(issue.issues[0]!, path, message) : { path, issue, message }
    default:
      return { path, issue, message }
  }
}

const valueAt = (input: unknown, path: ReadonlyArray<PropertyKey>): unknown =>
  path.reduce<unknown>(
    (
      value,
      key
    ) => (typeof value === "object" && value !== null ? (value as Record<PropertyKey, unknown>)[key] : undefined),
    input
  )

const formatValue = (value: unknown): string => {
  if (value === undefined) return "undefined"
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

/**
 * One line naming the offending field and the rule it broke, from the first issue: the schemas' own
 * messages, else `Expected NewPet, actual []` from `input`; names and values cut short, never echoed whole.
 */
export const describeIssue = (issue: SchemaIssue.Issue, subject: string, input?: unknown): string => {
  const failure = firstFailure(issue, [], undefined)
  const where = failure.path.length === 0 ? subject : failure.path.map((key) => excerpt(String(key))).join(".")
  let message = failure.message
  if (message === undefined) {
    const leaf = failure.issue
    const annotations = leaf._tag === "InvalidType" ? leaf.ast.annotations : undefined
    const identifier = annotations?.message === undefined ? annotations?.identifier : undefined
    message = typeof identifier === "string"
      ? `Expected ${identifier}, actual ${formatValue(valueAt(input, failure.path))}`
      : SchemaIssue.makeFormatterStandardSchemaV1()(leaf).issues[0]?.message ?? "is invalid"
  }
  return `${where}: ${excerpt(message, 4 * maxExcerpt)}`
}
