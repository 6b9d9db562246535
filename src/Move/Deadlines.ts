import { Config, Context, Schema } from "effect"

/**
 * How long the db command waits for a PostgreSQL server to connect and to answer: one silent longer
 * is taken as gone, rather than waited on as long as the kernel keeps a silent socket open.
 */
export interface Deadlines {
  readonly connectMillis: number
  readonly statementMillis: number
}

/**
 * With the defaults, a server that stops answering ends a copy within 30 s: 20 s for the answer,
 * then at most 5 s to remove what the copy created (`cleanUp` in `Copy.ts`).
 */
const defaults: Deadlines = { connectMillis: 10_000, statementMillis: 20_000 }

export const Deadlines = Context.Reference<Deadlines>("petstore/Move/Deadlines", { defaultValue: () => defaults })

const seconds = (name: string, defaultMillis: number) =>
  Config.schema(
    Schema.NumberFromString.check(
      Schema.makeFilter((n: number) => (n > 0 && n <= 3600) || "must be a number of seconds above 0, at most 3600")
    ),
    name
  ).pipe(Config.map((n) => Math.round(n * 1000)), Config.withDefault(defaultMillis))

/** `DB_CONNECT_TIMEOUT_SECONDS` and `DB_STATEMENT_TIMEOUT_SECONDS`, for a store whose statements take longer. */
export const deadlinesConfig: Config.Config<Deadlines> = Config.all({
  connectMillis: seconds("DB_CONNECT_TIMEOUT_SECONDS", defaults.connectMillis),
  statementMillis: seconds("DB_STATEMENT_TIMEOUT_SECONDS", defaults.statementMillis)
})
