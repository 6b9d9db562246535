import { describe, expect, it } from "@effect/vitest"
import { createTestDatabase } from "./support/PostgresStores.js"
import { runCommand, startServer } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

describe("two instances on one PostgreSQL database", () => {
  it("share pets, cursors, idempotency records, key revocations and rate limits", async () => {
    await using database = await createTestDatabase()
    const env = { DATABASE_URL: database.url, RATE_LIMIT_PER_SECOND: "0.01", RATE_LIMIT_BURST: "12" }
    const [one, two] = await Promise.all([startServer(env), startServer(env)])
    try {
      const key = (await runCommand(["src/bin/keys.ts", "create", "--name", "shared"], env)).stdout.trim().split("\n")
        .at(-1)!
      const call = (server: typeof one, path: string, init: RequestInit = {}) =>
        fetch(`${server.url}${path}`, {
          ...init,
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...init.headers }
        })
      const create = (server: typeof one, name: string, headers: Record<string, string> = {}) =>
        call(server, "/v1/pets", { method: "POST", body: JSON.stringify({ name, categoryId: 1 }), headers })

      // A pet created through one is read through the other.
      const rex = await (await create(one, "Rex")).json()
      expect(await (await call(two, `/v1/pets/${rex.id}`)).json()).toEqual(rex)

      // A cursor from one continues on the other.
      await create(two, "Tom")
      const first = await call(one, "/v1/pets?limit=1")
      const next = first.headers.get("link")!.match(/<[^>]*(\/v1\/pets\?[^>]*)>/)![1]!
      expect(await (await call(two, next)).json()).toEqual([{ id: rex.id + 1, name: "Tom", categoryId: 1 }])

      // An idempotent POST repeated on the other instance returns the first pet.
      const once = await create(one, "Once", { "idempotency-key": "order-1" })
      const again = await create(two, "Once", { "idempotency-key": "order-1" })
      expect([once.status, again.status]).toEqual([201, 201])
      expect(await again.json()).toEqual(await once.json())

      // The bucket of 12 requests is shared: 7 spent so far, 5 more across both, then 429 on either.
      const statuses = []
      for (const server of [one, two, one, two, one, two, one]) statuses.push((await call(server, "/v1/pets")).status)
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429])

      // A key revoked while both run is refused by both within a second.
      await runCommand(["src/bin/keys.ts", "revoke", "1"], env)
      await waitFor(
        async () => (await call(one, "/v1/pets")).status === 401 && (await call(two, "/v1/pets")).status === 401,
        {
          what: "the revoked key refused by both",
          timeout: 1000,
          interval: 50
        }
      )
    } finally {
      await Promise.all([one.stop(), two.stop()])
    }
  })
})
