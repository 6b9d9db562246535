import { Effect, Option } from "effect"
import type { SqlClient } from "effect/sql"
import {
  lastHandedOut,
  migrationsTable,
  nextId,
  sequencedTables,
  setNextId,
  tablesOf,
  versionOf
} from "./SchemaVersion.js"
import { connect, describeStoreFailure, MoveError, type Store } from "./Store.js"
import { tables } from "./Tables.js"

/**
 * A restore from `pg_dump` brings back the id sequences as they were at the backup, below ids handed
 * out since: `lastId` reads what the database to be replaced handed out, while it still exists, and
 * `restoreIds` sets the restored database's sequences above it, so that no id is handed out twice.
 */

/** The tables with an id sequence that the store holds; refused when it is not a Pet Store database. */
const sequencedIn = (sql: SqlClient.SqlClient, store: Store) =>
  Effect.gen(function*() {
    if (Option.isNone(yield* versionOf(sql))) {
      return yield* new MoveError({
        message: `the database ${store.label} is not a Pet Store database: it has no ${migrationsTable} table`
      })
    }
    const names = yield* tablesOf(sql)
    return sequencedTables(tables).filter((table) => names.has(table.name))
  })

/** The highest id any of the store's tables has handed out (its sequence's, not only its rows'), 0 when none. */
export const lastId = (store: Store) =>
  Effect.gen(function*() {
    const sql = yield* connect(store, { role: "the", mode: "read" })
    const handedOut = yield* Effect.forEach(yield* sequencedIn(sql, store), (table) => lastHandedOut(sql, table))
    return Math.max(0, ...handedOut)
  }).pipe(Effect.mapError((error) => describeStoreFailure(store, "the", error)), Effect.scoped)

/** Sets every id sequence of the store above `above` (and above its own rows); one never goes down. */
export const restoreIds = (store: Store, above: number) =>
  Effect.gen(function*() {
    if (!Number.isSafeInteger(above) || above < 0) {
      return yield* new MoveError({ message: `--above: must be an id, 0 or more (got ${above})` })
    }
    const sql = yield* connect(store, { role: "the", mode: "write" })
    const sequenced = yield* sequencedIn(sql, store)
    const set = yield* sql.withTransaction(Effect.forEach(sequenced, (table) =>
      Effect.gen(function*() {
        const was = yield* nextId(sql, table)
        const next = Math.max(was, (yield* lastHandedOut(sql, table)) + 1, above + 1)
        if (next === was) return `${table.name} ${next} (already)`
        yield* setNextId(sql, table, next)
        return `${table.name} ${next} (was ${was})`
      })))
    return `next ids above ${above} in ${store.label}: ${set.join(", ")}`
  }).pipe(Effect.mapError((error) => describeStoreFailure(store, "the", error)), Effect.scoped)
