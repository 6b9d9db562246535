import type { CanonicalRow } from "./Tables.js"

/** A row as one string that no other row gives: each value's length before it; null apart from "". */
const encode = (row: CanonicalRow) => {
  let text = ""
  for (const value of row) text += value === null ? "N" : `${value.length}:${value}`
  return text
}

/**
 * A table's row count and an order-independent checksum over every copied column: the sum,
 * modulo 2^64, of each canonical row's 64-bit hash. Order-independent, so each engine can read
 * in its own order; a sum rather than an exclusive or, so two equal rows do not cancel out.
 */
export class Checksum {
  rows = 0
  private sum = 0n

  add(rows: ReadonlyArray<CanonicalRow>): void {
    let sum = this.sum
    for (const row of rows) sum += BigInt(Bun.hash(encode(row)))
    this.sum = BigInt.asUintN(64, sum)
    this.rows += rows.length
  }

  get hex(): string {
    return this.sum.toString(16).padStart(16, "0")
  }

  equals(that: Checksum): boolean {
    return this.rows === that.rows && this.sum === that.sum
  }
}
