/** Where the OpenAPI document and the interactive docs page are served, beside the API. */
export const openApiPath = "/v1/openapi.json"
export const docsPath = "/docs"
export const rootPath = "/"

/** The routes served beside the API (`Http/Docs.ts`), outside its definition so client and document stay the API's. */
export const documentRoutes = [openApiPath, docsPath, rootPath].map((path) => ({ method: "GET" as const, path }))
