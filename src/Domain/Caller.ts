import { Context } from "effect"

/** The API key a request was authenticated with, provided to handlers by `Authentication`. */
export class CurrentCaller extends Context.Service<CurrentCaller, { readonly keyId: number; readonly name: string }>()(
  "petstore/CurrentCaller"
) {}
