
type Json = Record<string, any>

const decodeErrorRef = "#/components/schemas/HttpApiDecodeError"

/**
 * HttpApi declares its internal decode error on every operation; the service never sends it (it
 * answers with the Error body instead), so the document describes only what is sent.
 */
export const withoutInternalDecodeError = (spec: Json): Json => {
  for (const operations of Object.values<Json>(spec.paths)) {
    for (const operation of Object.values<Json>(operations)) {
      const badRequest = operation.responses?.["400"]
      const content = badRequest?.content?.["application/json"]
      if (!content) continue
      const members: Array<Json> = content.schema.anyOf ?? [content.schema]
      const kept = members.filter((member) => member.$ref !== decodeErrorRef)
      if (kept.length === members.length) continue
      if (kept.length === 0) {
        delete operation.responses["400"]
        continue
      }
      content.schema = kept.length === 1 ? kept[0] : { anyOf: kept }
      badRequest.description = kept[0]!.description ?? badRequest.description
    }
  }
  delete spec.components.schemas.HttpApiDecodeError
  delete spec.components.schemas.Issue
  return spec
}

