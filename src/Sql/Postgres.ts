import { BunContext } from "@effect/platform-bun"
import { Migrator } from "@effect/sql"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { Effect, Layer, Predicate } from "effect"
import { AppConfig } from "../AppConfig.js"
import { observedPgPool } from "../Observability/PgPool.js"
import createPets from "./postgres-migrations/0001_create_pets.js"
import createApiKeys from "./postgres-migrations/0002_create_api_keys.js"
import createSettings from "./postgres-migrations/0003_create_settings.js"
import createIdempotencyKeys from "./postgres-migrations/0004_create_idempotency_keys.js"
import createRateLimitBuckets from "./postgres-migrations/0005_create_rate_limit_buckets.js"
import leaseRateLimitBuckets from "./postgres-migrations/0006_lease_rate_limit_buckets.js"

export const migrations = Migrator.fromRecord({
  "0001_create_pets": createPets,
  "0002_create_api_keys": createApiKeys,
  "0003_create_settings": createSettings,
  "0004_create_idempotency_keys": createIdempotencyKeys,
  "0005_create_rate_limit_buckets": createRateLimitBuckets,
  "0006_lease_rate_limit_buckets": leaseRateLimitBuckets
})

/** Any number the migrations' advisory lock can be known by; the same on every instance. */
const migrationLock = 7_346_270_001

/** Whether a `DATABASE_URL` names a PostgreSQL database rather than a SQLite file. */
export const isPostgresUrl = (databaseUrl: string): boolean => /^postgres(ql)?:\/\//i.test(databaseUrl)

/**
 * Why the database `DATABASE_URL` names could not be reached, naming its host and port (never the
 * user's password, which the URL carries) and the driver's reason: refused, unknown host, timeout.
 */
const cannotConnect = (databaseUrl: string, error: unknown): Error => {
  let url: URL
  try {
    url = new URL(databaseUrl)
  } catch {
    // Quoting the value could show its password.
    return new Error("DATABASE_URL is not a valid postgres:// URL (a password's reserved characters must be percent-encoded)")
  }
  const { hostname, port } = url
  const cause = Predicate.hasProperty(error, "cause") ? error.cause : error
  const reason = cause instanceof Error ? cause.message : String(cause)
  let password = url.password
  try {
    password = decodeURIComponent(password)
  } catch {
    // Left as written: the reason is searched for either spelling below.
  }
  return new Error(
    `Cannot connect to the PostgreSQL database at ${hostname || "localhost"}:${port || "5432"} that DATABASE_URL ` +
      `names: ${password === "" ? reason : reason.replaceAll(password, "***")}`
  )
}

/**
 * The PostgreSQL database a `postgres://` `DATABASE_URL` names, through a pool of connections,
 * with its numbered migrations applied before anything is served. Instances starting together
 * queue on an advisory lock held by one connection while the migrator runs on the others, so the
 * first migrates and the rest find nothing left to do; the lock goes with its session if an
 * instance dies meanwhile.
 */
export const PostgresLive = Layer.unwrapEffect(
  Effect.map(AppConfig, ({ databaseUrl }) =>
    PgClient.layerFromPool({
      acquire: observedPgPool({ url: databaseUrl, max: 20, applicationName: "petstore" }),
      applicationName: "petstore"
    }).pipe(Layer.catchAll((error) => Layer.fail(cannotConnect(databaseUrl, error))))
  )
).pipe(
  Layer.tap((context) =>
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const lockHolder = yield* sql.reserve
      yield* Effect.acquireRelease(
        lockHolder.executeRaw(`SELECT pg_advisory_lock(${migrationLock})`, []),
        () => Effect.ignore(lockHolder.executeRaw(`SELECT pg_advisory_unlock(${migrationLock})`, []))
      )
      yield* PgMigrator.run({ loader: migrations })
    }).pipe(Effect.scoped, Effect.provide(context), Effect.provide(BunContext.layer))
  )
)
