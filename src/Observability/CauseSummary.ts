import { Cause, Predicate } from "effect"

/** What went wrong in one line for a log: name and message, never the stack (logs leave the machine). */
export const summarizeCause = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  if (error instanceof Error) return error.name === "Error" ? error.message : `${error.name}: ${error.message}`
  if (Predicate.hasProperty(error, "message") && typeof error.message === "string") return error.message
  return String(error)
}
