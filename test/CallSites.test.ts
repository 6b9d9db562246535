import { Statement } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { type Compiled, makeCallSiteCompiler } from "../src/Sql/CallSites.js"

/** The library's own statements and compiler, as the service's SQLite client builds them; never run here. */
const library = Statement.make(Effect.dieMessage("compiled only"), Statement.makeCompilerSqlite(), [], undefined)

/** The call-site compiler over the library's, counting how often the library compiles. */
const counted = () => {
  let compiles = 0
  const compile = makeCallSiteCompiler((strings, args): Compiled => {
    compiles++
    return library(strings, ...args).compile()
  })
  return { compile, compiles: () => compiles }
}

/** A template's strings and arguments, as a tagged call passes them. */
const call = (strings: TemplateStringsArray, ...args: Array<unknown>) => [strings, args] as const

describe("statements compiled by their call site", () => {
  const columns = library.literal("id, name, category_id, status")

  it("compiles a call site once, then binds each call's parameters to the same text", () => {
    const { compile, compiles } = counted()
    const byId = (id: number) => call`SELECT ${columns} FROM pets WHERE id = ${id}`
    for (const id of [1, 7, 42]) {
      const [strings, args] = byId(id)
      expect(compile(strings, args)).toStrictEqual(library(strings, ...args).compile())
      expect(compile(strings, args)).toStrictEqual(["SELECT id, name, category_id, status FROM pets WHERE id = ?", [id]])
    }
    expect(compiles()).toBe(1)
  })

  it("binds every kind of parameter as the library does: text, numbers, null, undefined, booleans, bigints", () => {
    const { compile, compiles } = counted()
    const insert = (name: unknown, category: unknown, status: unknown) =>
      call`INSERT INTO pets (name, category_id, status) VALUES (${name}, ${category}, ${status})`
    const rows: ReadonlyArray<readonly [unknown, unknown, unknown]> = [["Rex", 1, null], ["Tom", -3, undefined], ["x", 2n, true]]
    for (const [name, category, status] of rows) {
      const [strings, args] = insert(name, category, status)
      expect(compile(strings, args)).toStrictEqual(library(strings, ...args).compile())
    }
    expect(compiles()).toBe(1)
  })

  it("compiles through the library whenever a call differs from the one learnt: another fragment, a helper, an object", () => {
    const { compile, compiles } = counted()
    const fewer = library.literal("id")
    const select = (what: unknown, id: unknown) => call`SELECT ${what} FROM pets WHERE id = ${id}`
    const calls = [
      select(columns, 1),
      select(fewer, 2),
      select(3, 3),
      select(columns, library.in([1, 2, 3])),
      select(columns, new Date(0)),
      select(columns, 4)
    ]
    for (const [strings, args] of calls) {
      expect(compile(strings, args)).toStrictEqual(library(strings, ...args).compile())
    }
    // Learnt from the first; the last is the only call like it.
    expect(compiles()).toBe(5)
  })

  it("never learns a call site whose first call holds a helper or a fragment with parameters of its own", () => {
    const { compile, compiles } = counted()
    const inList = (ids: ReadonlyArray<number>) => call`SELECT id FROM pets WHERE id IN ${library.in(ids)}`
    const withParameter = (name: string) => call`SELECT id FROM pets WHERE ${library.unsafe("name = ?", [name])}`
    for (const [strings, args] of [inList([1]), inList([1, 2]), withParameter("Rex"), withParameter("Tom")]) {
      expect(compile(strings, args)).toStrictEqual(library(strings, ...args).compile())
    }
    expect(compiles()).toBe(4)
  })

  it("tells call sites apart by their strings, not by their text", () => {
    const { compile, compiles } = counted()
    const first = (id: number) => call`SELECT id FROM pets WHERE id = ${id}`
    const second = (id: number) => call`SELECT id FROM pets WHERE id = ${id}`
    const [a, aArgs] = first(1)
    const [b, bArgs] = second(2)
    expect(compile(a, aArgs)).toStrictEqual(["SELECT id FROM pets WHERE id = ?", [1]])
    expect(compile(b, bArgs)).toStrictEqual(["SELECT id FROM pets WHERE id = ?", [2]])
    expect(compiles()).toBe(2)
  })
})
