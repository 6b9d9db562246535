import { Pet } from "../Domain/Pet.js"

const fields = Object.keys(Pet.fields) as ReadonlyArray<keyof Pet>

/** A field's value in a cell: `-` when absent or empty, a list's items joined by commas. */
const cell = (value: unknown): string =>
  value === undefined || (Array.isArray(value) && value.length === 0)
    ? "-"
    : Array.isArray(value)
    ? value.join(",")
    : typeof value === "object" && value !== null
    ? JSON.stringify(value)
    : String(value)

/** Pets as the command line prints them without `--json`: a header line, then a line per pet, in aligned columns. */
export const petTable = (pets: ReadonlyArray<Pet>): string => {
  const rows = [fields, ...pets.map((pet) => fields.map((field) => cell(pet[field])))]
  const widths = fields.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)))
  return rows.map((row) => row.map((text, column) => text.padEnd(widths[column]!)).join("  ").trimEnd()).join("\n")
}
