import { PgClient } from "@effect/sql-pg"
import { Effect, Exit, Layer, Redacted, Scope } from "effect"
import { randomBytes } from "node:crypto"
import { AppConfig } from "../../src/Config/AppConfig.js"
import { PostgresConnection } from "../../src/Sql/PostgresConnection.js"
import { sharedPostgresUrl } from "./SharedPostgres.js"

/** The run's cluster, started when a test first needs it. */
const clusterUrl = Effect.promise(sharedPostgresUrl)

/** One statement as the cluster's superuser, on a connection of its own. */
const asAdmin = (statement: string) =>
  Effect.flatMap(Effect.service(PgClient.PgClient), (sql) => sql.unsafe(statement)).pipe(
    Effect.provide(
      Layer.unwrap(Effect.map(clusterUrl, (url) => PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })))
    ),
    Effect.orDie
  )

/** A new, empty database on the test cluster, dropped when the scope closes; its URL. */
export const temporaryDatabase = Effect.acquireRelease(
  Effect.sync(() => `petstore_${randomBytes(6).toString("hex")}`).pipe(
    Effect.tap((name) => asAdmin(`CREATE DATABASE ${name}`))
  ),
  (name) => asAdmin(`DROP DATABASE ${name} WITH (FORCE)`)
).pipe(Effect.flatMap((name) =>
  Effect.map(clusterUrl, (cluster) => {
    const url = new URL(cluster)
    url.pathname = `/${name}`
    return url.toString()
  })
))

/** A migrated PostgreSQL database of its own, dropped when the layer is released. */
export const TemporaryPostgres = Layer.unwrap(
  Effect.map(
    temporaryDatabase,
    (databaseUrl) => PostgresConnection.pipe(Layer.provide(AppConfig.make({ databaseUrl })))
  )
)

/** A new database on the test cluster for tests outside Effect; dropped on `await using` exit. */
export const createTestDatabase = async () => {
  const scope = Scope.makeUnsafe()
  const url = await Effect.runPromise(Scope.provide(temporaryDatabase, scope))
  return { url, [Symbol.asyncDispose]: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}
