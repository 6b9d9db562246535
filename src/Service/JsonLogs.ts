import { Logger } from "effect"

/** One JSON object per line on stdout, its fields named and ordered as they always were, for what reads the logs. */
const jsonLogger = Logger.withConsoleLog(
  Logger.map(
    Logger.formatStructured,
    ({ annotations, cause, fiberId, level, message, spans, timestamp }) =>
      JSON.stringify({ message, logLevel: level, timestamp, cause, annotations, spans, fiberId })
  )
)

/** The service's logger, in place of the default one. */
export const JsonLogs = Logger.layer([jsonLogger])
