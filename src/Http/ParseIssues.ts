import type { ParseResult } from "effect"

/**
 * One line naming the offending field or parameter and the rule it broke, from the first issue a
 * Schema decoder reported: `name: must be a string of 1 to 255 characters`.
 */
export const describeIssues = (
  issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>,
  subject: string
): string => {
  const issue = issues[0]
  if (issue === undefined) return `${subject}: is invalid`
  const where = issue.path.length === 0 ? subject : issue.path.map(String).join(".")
  return `${where}: ${issue.message}`
}
