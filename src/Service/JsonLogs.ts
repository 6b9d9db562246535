import { Logger } from "effect"

/**
 * The service's log lines: one JSON object per line on stdout, its fields named and ordered as
 * they always were (`message`, `logLevel`, `timestamp`, `cause` when there is one, `annotations`,
 * `spans`, `fiberId`), so that whatever reads the logs reads them as before.
 */
export const jsonLogger = Logger.withConsoleLog(
  Logger.map(
    Logger.formatStructured,
    ({ annotations, cause, fiberId, level, message, spans, timestamp }) =>
      JSON.stringify({ message, logLevel: level, timestamp, cause, annotations, spans, fiberId })
  )
)

/** The service's logger, in place of the default one. */
export const JsonLogs = Logger.layer([jsonLogger])
