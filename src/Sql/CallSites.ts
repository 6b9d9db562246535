import { Statement } from "@effect/sql"

/** What a statement runs: its SQL text and its parameters, as the library's compiler gives them. */
export type Compiled = readonly [sql: string, params: ReadonlyArray<unknown>]

/** A template's SQL text, learnt from its first call, and what each of its arguments was. */
interface CallSite {
  readonly sql: string
  /** Per argument: the fragment spliced in at that place (the same object on every call), or undefined for a parameter. */
  readonly fragments: ReadonlyArray<Statement.Fragment | undefined>
}

/** A value the compiler binds as it is (`?`), never spliced into the text. */
const isParameter = (arg: unknown): boolean =>
  arg === null || arg === undefined || typeof arg === "string" || typeof arg === "number" ||
  typeof arg === "bigint" || typeof arg === "boolean"

/** A fragment that only adds text: a `sql.literal` (the stores' column lists), with no parameter of its own. */
const isTextOnly = (arg: unknown): arg is Statement.Fragment =>
  Statement.isFragment(arg) &&
  arg.segments.every((segment) => segment._tag === "Literal" && (segment.params === undefined || segment.params.length === 0))

/** Call sites learnt at most: the service has a few dozen. */
const maxCallSites = 1000

/**
 * Compiles a template statement (`` sql`…` ``) by its call site. A template literal passes the same
 * strings object on every call from one place in the code, so a statement whose arguments are
 * parameters, or the same text-only fragments as before, has the same SQL text every time: it is
 * learnt once from the library's own compiler (and kept only if the parameters it bound are the
 * arguments, in order), and later calls take their parameters straight from the arguments.
 * Anything else (a helper such as `sql.in`, another fragment) is compiled by the library each
 * time. Building and compiling a statement costs about a fifth of a SQLite read through the
 * service's client; the cache is bounded by the number of call sites in the code.
 */
export const makeCallSiteCompiler = (
  compile: (strings: TemplateStringsArray, args: ReadonlyArray<unknown>) => Compiled
) => {
  // A cache keyed by the strings of a template in the code, never by a request: one entry per
  // `sql` call site of the service (a few dozen), whatever the traffic. Past the bound (strings
  // built at run time rather than written in the code), statements are compiled each time.
  const sites = new Map<TemplateStringsArray, CallSite | null>()
  const learn = (args: ReadonlyArray<unknown>, [sql, binds]: Compiled): CallSite | null => {
    const fragments: Array<Statement.Fragment | undefined> = []
    const params: Array<unknown> = []
    for (const arg of args) {
      if (isParameter(arg)) {
        fragments.push(undefined)
        params.push(arg)
      } else if (isTextOnly(arg)) {
        fragments.push(arg)
      } else {
        return null
      }
    }
    const same = binds.length === params.length && binds.every((bind, i) => Object.is(bind, params[i]))
    return same ? { sql, fragments } : null
  }
  return (strings: TemplateStringsArray, args: ReadonlyArray<unknown>): Compiled => {
    const site = sites.get(strings)
    if (site === undefined) {
      const compiled = compile(strings, args)
      if (sites.size < maxCallSites) sites.set(strings, learn(args, compiled))
      return compiled
    }
    if (site === null || site.fragments.length !== args.length) return compile(strings, args)
    const params: Array<unknown> = []
    for (let i = 0; i < args.length; i++) {
      const fragment = site.fragments[i]
      const arg = args[i]
      if (fragment === undefined ? !isParameter(arg) : arg !== fragment) return compile(strings, args)
      if (fragment === undefined) params.push(arg)
    }
    return [site.sql, params]
  }
}
