import { Effect, Option } from "effect"
import { readOnlySince } from "../Sql/ReadOnlyMode.js"
import { knownVersion, migrationsTable, tablesOf, versionOf } from "./SchemaVersion.js"
import { connect, describeStoreFailure, engineName, type Store } from "./Store.js"

/** A quick look before and after a move: the engine, the schema version, read-only or not, and the rows per table. */
export const status = (store: Store) =>
  Effect.gen(function*() {
    const sql = yield* connect(store, { role: "the", mode: "read" })
    const known = yield* knownVersion
    const version = yield* versionOf(sql)
    const names = [...(yield* tablesOf(sql))].filter((name) => name !== migrationsTable && !name.startsWith("sqlite_"))
      .sort()
    const since = names.includes("settings") ? yield* readOnlySince(sql) : Option.none()
    const counts = yield* Effect.forEach(names, (name) =>
      Effect.map(sql.unsafe<{ count: string | number }>(`SELECT count(*) AS count FROM "${name}"`), ([row]) =>
        Number(row?.count ?? 0)))
    return [
      `engine          ${engineName(store)}`,
      `database        ${store.label}`,
      `schema version  ${
        Option.match(version, { onNone: () => "none (not a Pet Store database)", onSome: String })
      } ` +
      `(this build: ${known})`,
      `read-only       ${Option.match(since, { onNone: () => "off", onSome: (at) => `on since ${at.toISOString()}` })}`,
      "",
      `${"table".padEnd(20)}${"rows".padStart(12)}`,
      ...names.map((name, i) => `${name.padEnd(20)}${String(counts[i]).padStart(12)}`)
    ]
  }).pipe(
    Effect.mapError((error) => describeStoreFailure(store, "the", error)),
    Effect.scoped
  )
