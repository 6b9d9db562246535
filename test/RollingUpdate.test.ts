import { describe, expect, it } from "@effect/vitest"
import { startHaproxy } from "./support/Haproxy.js"
import { createTestDatabase } from "./support/PostgresStores.js"
import { createKey, freePort, startServer } from "./support/ServerProcess.js"
import { waitFor } from "./support/WaitFor.js"

interface Created {
  readonly id: number
  readonly name: string
}

/**
 * Clients calling through the balancer until stopped, each paced to `perClient` requests a
 * second: lists, gets of pets created so far, and creates with an Idempotency-Key, never retried.
 */
const clientLoop = (url: string, key: string, clients: number, perClient: number) => {
  let running = true
  const statuses: Array<number | string> = []
  const created: Array<Created> = []
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
  const startedAt = performance.now()
  const client = async (client: number) => {
    for (let n = 0; running; n++) {
      const sentAt = performance.now()
      const roll = n % 4
      const known = created[Math.floor(Math.random() * created.length)]
      try {
        if (roll === 0) {
          const name = `rolling ${client}.${n}`
          const response = await fetch(`${url}/v1/pets`, {
            method: "POST",
            headers: { ...headers, "idempotency-key": `rolling-${client}-${n}` },
            body: JSON.stringify({ name, categoryId: client })
          })
          statuses.push(response.status)
          if (response.status === 201) created.push({ id: ((await response.json()) as Created).id, name })
          else await response.arrayBuffer()
        } else {
          const response = await fetch(
            roll === 1 && known !== undefined ? `${url}/v1/pets/${known.id}` : `${url}/v1/pets`,
            { headers }
          )
          statuses.push(response.status)
          await response.arrayBuffer()
        }
      } catch (error) {
        statuses.push(String(error))
      }
      // Fixed: each client's pace, the load's rate.
      await Bun.sleep(Math.max(0, 1000 / perClient - (performance.now() - sentAt)))
    }
  }
  const all = Promise.all(Array.from({ length: clients }, (_, n) => client(n)))
  return {
    /** Waits until `count` more requests than now have their answer. */
    answering: (count: number) => {
      const from = statuses.length
      return waitFor(() => statuses.length >= from + count, { what: `${count} answers through the balancer` })
    },
    stop: async () => {
      running = false
      await all
      return { statuses, created, perSecond: statuses.length / ((performance.now() - startedAt) / 1000) }
    }
  }
}

const waitUntil = (condition: () => Promise<boolean>, what: string) =>
  waitFor(condition, { what, timeout: 20_000, interval: 50 })

describe("a rolling update behind HAProxy (deploy/haproxy/haproxy.cfg)", () => {
  it(
    "two instances on one PostgreSQL, each replaced in turn under 200+ requests a second: every answer 200 or 201, every create stored once",
    async () => {
      await using database = await createTestDatabase()
      const env = {
        DATABASE_URL: database.url,
        // Enough for the whole loop on one key: the limiter is not what is tested.
        RATE_LIMIT_PER_SECOND: "100000",
        RATE_LIMIT_BURST: "100000",
        // The balancer takes an instance out within about 1 s of its first failed /readyz.
        STOP_GRACE_SECONDS: "3",
        DRAIN_TIMEOUT_SECONDS: "5",
        LOG_LEVEL: "warn"
      }
      const key = await createKey(env)
      const ports = [freePort(), freePort()] as const
      const instances = [await startServer(env, ports[0]), await startServer(env, ports[1])]
      const balancer = await startHaproxy([`127.0.0.1:${ports[0]}`, `127.0.0.1:${ports[1]}`])
      // What the balancer said of each instance, watched all along.
      const watcher = balancer.watch()
      try {
        const bothUp = async () => Object.values(await balancer.states()).filter((state) => state === "UP").length === 2
        await waitUntil(bothUp, "both instances UP")
        const load = clientLoop(balancer.url, key, 8, 40)
        // About a second of the load on both before the first is replaced, and after the last.
        await load.answering(300)
        for (const index of [0, 1] as const) {
          // One port serves one service: the next process starts once this one has exited.
          expect(await instances[index]!.stop("SIGTERM")).toBe(0)
          instances[index] = await startServer(env, ports[index])
          await waitUntil(bothUp, `petstore${index + 1} UP again`)
        }
        await load.answering(300)
        const { created, perSecond, statuses } = await load.stop()

        expect(perSecond).toBeGreaterThanOrEqual(200)
        const unexpected = statuses.filter((status) => status !== 200 && status !== 201)
        expect(unexpected, `${unexpected.length} of ${statuses.length}`).toEqual([])
        // Out of the balancer before it stopped listening: not one request needed the balancer's retries.
        expect((await balancer.stats()).BACKEND).toMatchObject({ retries: 0, redispatches: 0 })
        // Each instance was taken out by the balancer and put back.
        expect(Object.keys(watcher.seen).sort()).toEqual(["petstore1", "petstore2"])
        for (const states of Object.values(watcher.seen)) {
          expect([...states].some((state) => state.startsWith("DOWN"))).toBe(true)
        }

        // Every acknowledged create is stored, exactly once, under the id it was acknowledged with.
        const stored: Array<Created> = []
        for (let next: string | undefined = `${instances[0]!.url}/v1/pets?limit=100`; next !== undefined;) {
          const response: Response = await fetch(next, { headers: { authorization: `Bearer ${key}` } })
          stored.push(...((await response.json()) as Array<Created>))
          next = /<[^>]*(\/v1\/pets\?[^>]*)>; rel="next"/.exec(response.headers.get("link") ?? "")?.[1]
          if (next !== undefined) next = `${instances[0]!.url}${next}`
        }
        expect(created.length).toBeGreaterThan(100)
        for (const pet of created) {
          expect(stored.filter((other) => other.name === pet.name).map((other) => other.id)).toEqual([pet.id])
        }
      } finally {
        await watcher.stop()
        await balancer.stop()
        for (const instance of instances) instance?.proc.kill("SIGKILL")
      }
    },
    90_000
  )
})
