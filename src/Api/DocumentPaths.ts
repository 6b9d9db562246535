/** Where the OpenAPI document and the interactive docs page are served, beside the API. */
export const openApiPath = "/v1/openapi.json"
export const docsPath = "/docs"
/** Redirects to the docs page. */
export const rootPath = "/"
