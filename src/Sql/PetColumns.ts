import { NewPet, type Pet, PetStatus } from "../Domain/Pet.js"

/**
 * The `pets` table's columns, one per field of a `Pet`: every statement the pets' store runs reads
 * and writes the columns listed here, and each row read is checked against them. The type below
 * makes a field of the Pet schema without its column here a type error.
 */

/** How a field's value is kept: the value a statement binds, and the value read back (`undefined` for one of the wrong shape). */
export interface ColumnCodec<A> {
  readonly write: (value: A) => string | number
  readonly read: (value: unknown) => A | undefined
}

/** A field's column: its name, and whether NULL stands for the field left out (an optional field). */
export interface PetColumn<A> extends ColumnCodec<A> {
  readonly name: string
  readonly optional: boolean
}

type PetColumns = {
  readonly [Field in keyof Pet]-?: PetColumn<Exclude<Pet[Field], undefined>> & {
    // NULL for an absent value exactly when the schema lets the field be absent.
    readonly optional: {} extends Pick<Pet, Field> ? true : false
  }
}

/** Numbers as SQLite gives them; PostgreSQL's BIGINT columns come as bigints (or decimal text). */
const integer: ColumnCodec<number> = {
  write: (value) => value,
  read: (value) => {
    const number = typeof value === "number"
      ? value
      : typeof value === "bigint" || typeof value === "string"
      ? Number(value)
      : NaN
    return Number.isSafeInteger(number) ? number : undefined
  }
}

const text: ColumnCodec<string> = {
  write: (value) => value,
  read: (value) => (typeof value === "string" ? value : undefined)
}

/** Text that is one of the schema's literals. */
const oneOf = <const A extends string>(literals: ReadonlyArray<A>): ColumnCodec<A> => {
  const known: ReadonlySet<unknown> = new Set(literals)
  return { write: (value) => value, read: (value) => (known.has(value) ? (value as A) : undefined) }
}

const required = <A>(name: string, codec: ColumnCodec<A>) => ({ ...codec, name, optional: false as const })
const optional = <A>(name: string, codec: ColumnCodec<A>) => ({ ...codec, name, optional: true as const })

/** Each field's column, in the schema's order (the order a pet's JSON has). */
export const petColumns: PetColumns = {
  id: required("id", integer),
  name: required("name", text),
  categoryId: required("category_id", integer),
  status: optional("status", oneOf(PetStatus.literals))
}

const fields = Object.entries(petColumns) as ReadonlyArray<readonly [keyof Pet, PetColumn<unknown>]>

/** Every column, in the schema's order: what every statement that reads a pet selects. */
export const petColumnNames: ReadonlyArray<string> = fields.map(([, column]) => column.name)

const newPetFields = Object.keys(NewPet.fields) as ReadonlyArray<keyof NewPet>

/** The columns an INSERT of a new pet writes: one per field of `NewPet`, in its order. */
export const newPetColumnNames: ReadonlyArray<string> = newPetFields.map((field) => petColumns[field].name)

/** A new pet's values for `newPetColumnNames`, in their order: NULL for a field left out. */
export const newPetValues = (pet: NewPet): Array<string | number | null> =>
  newPetFields.map((field) => {
    const value = pet[field]
    return value === undefined ? null : (petColumns[field] as PetColumn<unknown>).write(value)
  })

/**
 * A `pets` row as a `Pet`, each column checked by its field's codec: decoding through a Schema
 * costs more than the query on a page of 100. A NULL optional column leaves its field out.
 */
export const petFromRow = (row: Readonly<Record<string, unknown>>): Pet => {
  const pet: Record<string, unknown> = {}
  for (const [field, column] of fields) {
    const value = row[column.name]
    if (value === null || value === undefined) {
      if (column.optional) continue
    } else {
      const read = column.read(value)
      if (read !== undefined) {
        pet[field] = read
        continue
      }
    }
    throw new Error(`pets row ${String(row[petColumns.id.name])}: ${column.name} does not have the table's shape`)
  }
  return pet as Pet
}
