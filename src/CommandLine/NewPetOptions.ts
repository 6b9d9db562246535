import { Option } from "effect"
import { NewPet } from "../Domain/Pet.js"

/** The option that sets a field: the field's name in kebab case (`categoryId` → `--category-id`). */
export const optionName = (field: string) => `--${field.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)}`

/** Each field of `NewPet` and the option that sets it, so that an error about the field names the option. */
export const newPetOptionNames: Readonly<Record<string, string>> = Object.fromEntries(
  Object.keys(NewPet.fields).map((field) => [field, optionName(field)])
)

/** What `pets create` parsed for each field of `NewPet`: the value, or for a field it may leave out, an Option. */
export type NewPetOptions = {
  readonly [Field in keyof NewPet]-?: {} extends Pick<NewPet, Field> ? Option.Option<Exclude<NewPet[Field], undefined>>
    : NewPet[Field]
}

/**
 * The new pet `pets create` sends: a value for every field of `NewPet` (a field the command line
 * has no option for fails the type check where this is called), an optional one left out when
 * not given.
 */
export const newPetFromOptions = (options: NewPetOptions): NewPet => {
  const pet: Record<string, unknown> = {}
  for (const [field, value] of Object.entries(options) as Array<[string, unknown]>) {
    if (!Option.isOption(value)) pet[field] = value
    else if (Option.isSome(value)) pet[field] = value.value
  }
  return pet as NewPet
}
