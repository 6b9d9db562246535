import { SchemaIssue } from "effect"

/** The longest piece of a request an error message repeats: enough to recognise it, never the whole of it. */
const maxExcerpt = 64

/** `text` as an error message may quote it: at most `max` characters, cut ones marked with `…`. */
export const excerpt = (text: string, max: number = maxExcerpt): string =>
  text.length <= max ? text : `${text.slice(0, max)}…`

const valueAt = (input: unknown, keys: ReadonlyArray<PropertyKey>): unknown =>
  keys.reduce<unknown>((value, key) => (value as Record<PropertyKey, unknown> | null | undefined)?.[key], input)

const firstIssue = SchemaIssue.makeFormatterStandardSchemaV1()

/** The first issue's field and rule (the schema's message, else `Expected NewPet, actual []`), never quoted whole. */
export const describeIssue = (issue: SchemaIssue.Issue, subject: string, input?: unknown): string => {
  const { message, path = [] } = firstIssue(issue).issues[0] ?? { message: "is invalid" }
  const keys = path.map((key) => typeof key === "object" ? key.key : key)
  const where = keys.length === 0 ? subject : keys.map((key) => excerpt(String(key))).join(".")
  // A value of the wrong type, where the schema words no rule, is shown as it came (a parsed JSON body, or nothing).
  const actual = /^Expected \w+$/.test(message) ? `, actual ${JSON.stringify(valueAt(input, keys)) ?? "undefined"}` : ""
  return `${where}: ${excerpt(message + actual, 4 * maxExcerpt)}`
}
