import type { ParseResult } from "effect"

/** The longest piece of a request an error message repeats: enough to recognise it, never the whole of it. */
const maxExcerpt = 64

/** `text` as an error message may quote it: at most `max` characters, cut ones marked with `…`. */
export const excerpt = (text: string, max: number = maxExcerpt): string =>
  text.length <= max ? text : `${text.slice(0, max)}…`

/**
 * One line naming the offending field or parameter and the rule it broke, from the first issue a
 * Schema decoder reported: `name: must be a string of 1 to 255 characters`. Field names and the
 * decoder's quotes of the value are cut short: a client's 60 KB key or value is not sent back.
 */
export const describeIssues = (
  issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>,
  subject: string
): string => {
  const issue = issues[0]
  if (issue === undefined) return `${subject}: is invalid`
  const where = issue.path.length === 0 ? subject : issue.path.map((key) => excerpt(String(key))).join(".")
  return `${where}: ${excerpt(issue.message, 4 * maxExcerpt)}`
}
