import { Cause, Predicate } from "effect"

/**
 * What went wrong, in one line for a log: the first failure or defect's name and message, never
 * its stack trace (logs leave the machine; code paths and file names stay on it).
 */
export const summarizeCause = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  if (error instanceof Error) return error.name === "Error" ? error.message : `${error.name}: ${error.message}`
  if (Predicate.hasProperty(error, "message") && typeof error.message === "string") return error.message
  return String(error)
}
