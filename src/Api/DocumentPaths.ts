/** Where the OpenAPI document and the interactive docs page are served, beside the API. */
export const openApiPath = "/v1/openapi.json"
export const docsPath = "/docs"
/** Redirects to the docs page. */
export const rootPath = "/"

/**
 * The routes served beside the API's endpoints (`Http/Docs.ts`), not part of the API definition
 * so that the derived client and the OpenAPI document stay the API's alone. The route table
 * (`Http/Routes.ts`) reads them with the definition's endpoints.
 */
export const documentRoutes: ReadonlyArray<{ readonly method: "GET"; readonly path: string }> = [
  { method: "GET", path: openApiPath },
  { method: "GET", path: docsPath },
  { method: "GET", path: rootPath }
]
