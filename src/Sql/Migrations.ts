import { Migrator } from "effect/sql"
import createPets from "./migrations/0001_create_pets.js"
import createApiKeys from "./migrations/0002_create_api_keys.js"
import createSettings from "./migrations/0003_create_settings.js"
import createIdempotencyKeys from "./migrations/0004_create_idempotency_keys.js"
import createRateLimitBuckets from "./migrations/0005_create_rate_limit_buckets.js"
import leaseRateLimitBuckets from "./migrations/0006_lease_rate_limit_buckets.js"
import idempotencyKeysFollowPets from "./migrations/0007_idempotency_keys_follow_pets.js"

/** Names and numbers as databases recorded them in `effect_sql_migrations`: never renumber; a change is a new step. */
export const migrations = Migrator.fromRecord({
  "0001_create_pets": createPets,
  "0002_create_api_keys": createApiKeys,
  "0003_create_settings": createSettings,
  "0004_create_idempotency_keys": createIdempotencyKeys,
  "0005_create_rate_limit_buckets": createRateLimitBuckets,
  "0006_lease_rate_limit_buckets": leaseRateLimitBuckets,
  "0007_idempotency_keys_follow_pets": idempotencyKeysFollowPets
})

/** Applies the steps the database on the current `SqlClient` has not recorded yet, in one transaction. */
export const runMigrations = Migrator.make({})({ loader: migrations })
