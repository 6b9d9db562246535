/**
 * The benchmark's baseline: the Pet Store contract written by hand on plain `Bun.serve` and
 * `bun:sqlite` prepared statements, with the service's schema, pragmas, key-hash check, cursor
 * signing and JSON output. Usage: bun scripts/bench/baseline.ts <database file> <port>
 */
import { Database } from "bun:sqlite"
import { createHash, createHmac, timingSafeEqual } from "node:crypto"

const [filename, portText] = process.argv.slice(2)
const db = new Database(filename!, { readwrite: true })
db.run("PRAGMA journal_mode = WAL")
db.run("PRAGMA synchronous = NORMAL")
db.run("PRAGMA busy_timeout = 5000")

const secret = Buffer.from((db.query("SELECT value FROM settings WHERE name = 'cursor_secret'").get() as any).value, "hex")
const keyByHash = db.query("SELECT id, name FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL")
const byId = db.query("SELECT id, name, category_id, status FROM pets WHERE id = ?")
const pageAll = db.query("SELECT id, name, category_id, status FROM pets WHERE id > ? ORDER BY id LIMIT ?")
const pageByStatus = db.query(
  "SELECT id, name, category_id, status FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?"
)
const insert = db.query("INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING id")

const publicBaseUrl = `http://localhost:${portText}`
const statuses = new Set(["available", "pending", "sold"])
const json = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } })
const error = (status: number, code: string, message: string, headers: Record<string, string> = {}) =>
  json({ code, message, status }, status, headers)
const toPet = (row: any) =>
  row.status === null
    ? { id: row.id, name: row.name, categoryId: row.category_id }
    : { id: row.id, name: row.name, categoryId: row.category_id, status: row.status }
const sign = (payload: string) => createHmac("sha256", secret).update(payload).digest().subarray(0, 16)
const bearer = /^bearer +([\x21-\x7e]+) *$/i
const decimal = /^-?[0-9]{1,16}$/

function authenticate(request: Request): Response | undefined {
  const header = request.headers.get("authorization")
  if (header === null) {
    return error(401, "missing_api_key", "Authorization: an API key is required", {
      "www-authenticate": `Bearer realm="petstore"`
    })
  }
  const token = bearer.exec(header)?.[1]
  if (token === undefined || keyByHash.get(createHash("sha256").update(token).digest("hex")) === null) {
    return error(401, "invalid_api_key", "Authorization: the API key is unknown or revoked", {
      "www-authenticate": `Bearer realm="petstore", error="invalid_token"`
    })
  }
  return undefined
}

function listPets(url: URL): Response {
  const limitText = url.searchParams.get("limit")
  const limit = limitText === null ? 20 : decimal.test(limitText) ? Number(limitText) : NaN
  if (!(limit >= 1 && limit <= 100)) return error(400, "invalid_parameter", "limit: must be an integer from 1 to 100")
  const status = url.searchParams.get("status") ?? undefined
  if (status !== undefined && !statuses.has(status)) {
    return error(400, "invalid_parameter", "status: must be one of available, pending, sold")
  }
  let afterId = 0
  const cursor = url.searchParams.get("cursor")
  if (cursor !== null) {
    const [payloadPart, signaturePart] = cursor.split(".")
    const payload = Buffer.from(payloadPart ?? "", "base64url").toString()
    const signature = Buffer.from(signaturePart ?? "", "base64url")
    const [id, cursorStatus] = payload.split(".")
    if (signature.length !== 16 || !timingSafeEqual(signature, sign(payload)) || cursorStatus !== (status ?? "")) {
      return error(400, "invalid_cursor", "cursor: is not a cursor this service issued for this status filter")
    }
    afterId = Number(id)
  }
  const rows = status === undefined ? pageAll.all(afterId, limit + 1) : pageByStatus.all(status, afterId, limit + 1)
  const pets = rows.slice(0, limit).map(toPet)
  const headers: Record<string, string> = {}
  if (rows.length > limit) {
    const payload = `${pets[pets.length - 1]!.id}.${status ?? ""}`
    const next = new URL(`${publicBaseUrl}/v1/pets`)
    next.searchParams.set("limit", String(limit))
    if (status !== undefined) next.searchParams.set("status", status)
    next.searchParams.set("cursor", `${Buffer.from(payload).toString("base64url")}.${sign(payload).toString("base64url")}`)
    headers.link = `<${next.href}>; rel="next"`
  }
  return json(pets, 200, headers)
}

async function createPet(request: Request): Promise<Response> {
  if (!/^application\/json\s*(;|$)/i.test(request.headers.get("content-type") ?? "")) {
    return error(415, "unsupported_media_type", "Content-Type: must be application/json")
  }
  const text = await request.text()
  if (text.length > 65536) return error(413, "payload_too_large", "body: must be at most 65536 bytes")
  let body: any
  try {
    body = JSON.parse(text)
  } catch {
    return error(400, "malformed_json", "body: is not valid JSON")
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return error(400, "validation_failed", "body: must be a NewPet object")
  }
  for (const key of Object.keys(body)) {
    if (key !== "name" && key !== "categoryId" && key !== "status") {
      return error(400, "validation_failed", `${key}: is unexpected`)
    }
  }
  if (typeof body.name !== "string" || body.name.length < 1 || body.name.length > 255) {
    return error(400, "validation_failed", "name: must be a string of 1 to 255 characters")
  }
  if (!Number.isSafeInteger(body.categoryId)) {
    return error(400, "validation_failed", "categoryId: must be an integer in the safe range")
  }
  if (body.status !== undefined && !statuses.has(body.status)) {
    return error(400, "validation_failed", "status: must be one of available, pending, sold")
  }
  // Run to its end, as the service does, so SQLite's automatic checkpoint keeps the WAL bounded.
  const [{ id }] = insert.all(body.name, body.categoryId, body.status ?? null) as [{ id: number }]
  const pet = body.status === undefined
    ? { id, name: body.name, categoryId: body.categoryId }
    : { id, name: body.name, categoryId: body.categoryId, status: body.status }
  return json(pet, 201, { location: `/v1/pets/${id}` })
}

const deprecation = {
  deprecation: "@1767225600",
  sunset: "Thu, 05 Dec 2030 00:00:00 GMT",
  link: `<${publicBaseUrl}/docs#tag/pets/GET/v1/pets>; rel="deprecation"; type="text/html"`
}

function getPet(petId: string): Response {
  if (!decimal.test(petId) || !Number.isSafeInteger(Number(petId))) {
    return error(400, "invalid_parameter", "petId: must be a decimal integer in the safe range", deprecation)
  }
  const row = byId.get(Number(petId))
  return row === null
    ? error(404, "pet_not_found", `petId: no animal has id ${petId}`, deprecation)
    : json(toPet(row), 200, deprecation)
}

Bun.serve({
  port: Number(portText),
  hostname: "127.0.0.1",
  async fetch(request) {
    const url = new URL(request.url)
    const requestId = crypto.randomUUID()
    const response = await route(request, url)
    response.headers.set("x-request-id", requestId)
    return response
  }
})

async function route(request: Request, url: URL): Promise<Response> {
  if (url.pathname === "/v1/pets") {
    if (request.method !== "GET" && request.method !== "POST") {
      return error(405, "method_not_allowed", `method: ${request.method} is not allowed`, { allow: "GET, POST" })
    }
    return authenticate(request) ?? (request.method === "GET" ? listPets(url) : await createPet(request))
  }
  if (url.pathname.startsWith("/v1/pets/")) {
    if (request.method !== "GET") return error(405, "method_not_allowed", "method: not allowed", { allow: "GET" })
    const unauthorized = authenticate(request)
    if (unauthorized !== undefined) {
      for (const [name, value] of Object.entries(deprecation)) unauthorized.headers.set(name, value)
      return unauthorized
    }
    return getPet(url.pathname.slice("/v1/pets/".length))
  }
  if (url.pathname === "/livez") return json({ status: "ok" })
  return error(404, "route_not_found", `path: no route ${url.pathname}`)
}
