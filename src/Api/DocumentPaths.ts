/** Where the OpenAPI document and the interactive docs page are served, beside the API. */
export const openApiPath = "/v1/openapi.json"
export const docsPath = "/docs"
export const rootPath = "/"

/** The routes served beside the API (`Http/Docs.ts`), outside its definition so client and document stay the API's. */
export const documentRoutes: ReadonlyArray<{ readonly method: "GET"; readonly path: string }> = [
  { method: "GET", path: openApiPath },
  { method: "GET", path: docsPath },
  { method: "GET", path: rootPath }
]
