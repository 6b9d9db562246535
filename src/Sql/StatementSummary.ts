/** A table's name, without its schema or quotes. */
const tableName = String.raw`(?:ONLY\s+)?(?:"?\w+"?\.)?"?(\w+)(?!\w)`

// The first name after `FROM` (not a function's, `FROM unnest(…)`), `INTO`, `UPDATE`, `TABLE` (past `IF [NOT] EXISTS`),
// an index's `ON` or a leading `COPY`; a subquery's parenthesis is skipped for the next name.
const tableOf = new RegExp(
  String
    .raw`\bFROM\s+${tableName}(?!"?\s*\()|(?:^\s*COPY|\b(?:INTO|UPDATE|TABLE(?:\s+IF(?:\s+NOT)?\s+EXISTS)?|INDEX\b[^;(]*?\bON))\s+${tableName}`,
  "i"
)

/** `name`: its span's, the operation and the table (`SELECT pets`). */
type StatementSummary = Readonly<{ operation: string; table: string | undefined; name: string }>

/** Found by text, for up to 1,000 texts (the service has a few dozen); past that, found per call. */
const summaries = new Map<string, StatementSummary>()

/** A statement's operation (`SELECT`, …) and the table it works on, if it names one: its labels and its span's. */
export const statementSummary = (sql: string): StatementSummary => {
  let found = summaries.get(sql)
  if (found === undefined) {
    const match = tableOf.exec(sql)
    const operation = /^\s*(\w+)/.exec(sql)?.[1]?.toUpperCase() ?? "OTHER"
    const table = match?.[1] ?? match?.[2]
    found = { operation, table, name: table === undefined ? operation : `${operation} ${table}` }
    if (summaries.size < 1000) summaries.set(sql, found)
  }
  return found
}
