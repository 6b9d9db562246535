import { Option, Record } from "effect"
import { NewPet } from "../Domain/Pet.js"

/** The option that sets each field of `NewPet`, its name in kebab case: an error about the field names it. */
export const newPetOptionNames: Readonly<Record<string, string>> = Object.fromEntries(
  Object.keys(NewPet.fields).map((field) => [field, `--${field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`])
)

/** What `pets create` parsed for every field of `NewPet`: the value, or an Option for one it may leave out. */
export type NewPetOptions = {
  readonly [Field in keyof NewPet]-?: {} extends Pick<NewPet, Field> ? Option.Option<Exclude<NewPet[Field], undefined>>
    : NewPet[Field]
}

/** The new pet `pets create` sends; an optional field left out when not given. */
export const newPetFromOptions = (options: NewPetOptions): NewPet =>
  Record.getSomes(Record.map(options, (value) => (Option.isOption(value) ? value : Option.some(value)))) as NewPet
