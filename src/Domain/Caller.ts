import { Context } from "effect"

/** The API key a request was authenticated with, provided to handlers by `Authentication`. */
export class CurrentCaller extends Context.Tag("petstore/CurrentCaller")<
  CurrentCaller,
  { readonly keyId: number; readonly name: string }
>() {}
