import { NewPet, type Pet, PetStatus } from "../Domain/Pet.js"

/** How a field's value is kept: the value bound, and the value read back (`undefined`: the wrong shape). */
type ColumnCodec<A> = Readonly<{ write: (value: A) => string | number; read: (value: unknown) => A | undefined }>

/** A field's column: its name, and whether NULL stands for the field left out (an optional field). */
type PetColumn<A> = ColumnCodec<A> & Readonly<{ name: string; optional: boolean }>

/** One column per field of `Pet`: a field of the schema without its column here is a type error. */
type PetColumns = {
  readonly [Field in keyof Pet]-?: PetColumn<Exclude<Pet[Field], undefined>> & {
    readonly optional: {} extends Pick<Pet, Field> ? true : false
  }
}

/** Numbers as SQLite gives them; PostgreSQL's BIGINT columns come as bigints (or decimal text). */
const integer: ColumnCodec<number> = {
  write: (value) => value,
  read: (value) => {
    const number = typeof value === "number" || typeof value === "bigint" || typeof value === "string"
      ? Number(value)
      : NaN
    return Number.isSafeInteger(number) ? number : undefined
  }
}

const text: ColumnCodec<string> = {
  write: (value) => value,
  read: (value) => (typeof value === "string" ? value : undefined)
}

const oneOf = <const A extends string>(literals: ReadonlyArray<A>): ColumnCodec<A> => {
  const known: ReadonlySet<unknown> = new Set(literals)
  return { write: (value) => value, read: (value) => (known.has(value) ? (value as A) : undefined) }
}

const required = <A>(name: string, codec: ColumnCodec<A>) => ({ ...codec, name, optional: false as const })
const optional = <A>(name: string, codec: ColumnCodec<A>) => ({ ...codec, name, optional: true as const })

/** The `pets` table's columns in the schema's order (a pet's JSON's): what every pets statement reads and writes. */
const petColumns: PetColumns = {
  id: required("id", integer),
  name: required("name", text),
  categoryId: required("category_id", integer),
  status: optional("status", oneOf(PetStatus.literals))
}

const fields = Object.entries(petColumns) as ReadonlyArray<readonly [keyof Pet, PetColumn<unknown>]>

export const petColumnNames: ReadonlyArray<string> = fields.map(([, column]) => column.name)

const newPetFields = Object.keys(NewPet.fields) as ReadonlyArray<keyof NewPet>

/** The columns an INSERT of a new pet writes, in `NewPet`'s order, and a pet's values for them (NULL: left out). */
export const newPetColumnNames: ReadonlyArray<string> = newPetFields.map((field) => petColumns[field].name)

export const newPetValues = (pet: NewPet): Array<string | number | null> =>
  newPetFields.map((field) => {
    const value = pet[field]
    return value === undefined ? null : (petColumns[field] as PetColumn<unknown>).write(value)
  })

/** A `pets` row as a `Pet`, checked by each field's codec: a Schema's decoding costs more than a page's query. */
export const petFromRow = (row: Readonly<Record<string, unknown>>): Pet => {
  const pet: Record<string, unknown> = {}
  for (const [field, column] of fields) {
    const value = row[column.name]
    const absent = value === null || value === undefined
    const read = absent ? undefined : column.read(value)
    if (read !== undefined) pet[field] = read
    else if (!(absent && column.optional)) {
      throw new Error(`pets row ${String(row[petColumns.id.name])}: ${column.name} does not have the table's shape`)
    }
  }
  return pet as Pet
}
