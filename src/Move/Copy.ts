import { Clock, Effect, Option, type Scope } from "effect"
import { SqlClient } from "effect/sql"
import { existsSync } from "node:fs"
import { resolve } from "node:path"
import { runMigrations } from "../Sql/Migrations.js"
import { readOnlySince, settleMillis } from "../Sql/ReadOnlyMode.js"
import { Checksum } from "./Checksum.js"
import { cleanUp } from "./CleanUp.js"
import { columnsOnBothSides } from "./Columns.js"
import { withoutSecondaryIndexes } from "./Indexes.js"
import { openSession, type PostgresSession } from "./PostgresSession.js"
import { makeProgress } from "./Progress.js"
import { knownVersion, requireKnownVersion, tablesOf, versionOf } from "./SchemaVersion.js"
import { highestId, nextId, sequencedTables, setNextId } from "./Sequences.js"
import { connect, describeStoreFailure, engineName, MoveError, type Store } from "./Store.js"
import { countRows, tables } from "./Tables.js"
import { checksums, compare, forEachPage, inSnapshot } from "./Verify.js"
import { tableWriter } from "./WriteRows.js"

/** Settings rows the target's own migrations write; a target holding only those is empty. */
const migrationSettings = new Set(["cursor_secret", "read_only"])

export const sameStore = (a: Store, b: Store) =>
  a.engine === "sqlite" && b.engine === "sqlite" ? resolve(a.filename) === resolve(b.filename) : a.label === b.label

/**
 * Refuses a target that holds anything, then builds its schema from this build's migrations.
 * Returns the tables it created, for the clean-up of a failed copy.
 */
const prepareTarget = (sql: SqlClient.SqlClient, store: Store) =>
  Effect.gen(function*() {
    const before = yield* tablesOf(sql)
    const version = yield* versionOf(sql)
    if (Option.isNone(version) && before.size > 0) {
      return yield* new MoveError({
        message:
          `target ${store.label} holds tables that are not the Pet Store's (${[...before].slice(0, 5).join(", ")}); ` +
          "it was left untouched. Copy into an empty database"
      })
    }
    if (Option.isSome(version)) {
      const known = yield* knownVersion
      if (version.value > known) {
        return yield* new MoveError({
          message: `target ${store.label} has schema version ${version.value}, newer than the ` +
            `schema version ${known} this build knows; it was left untouched`
        })
      }
      const held: Array<string> = []
      for (const table of tables) {
        if (!before.has(table.name)) continue
        const rows = table.name === "settings"
          ? (yield* sql<{ name: string }>`SELECT name FROM settings`).filter(({ name }) => !migrationSettings.has(name))
            .length
          : yield* countRows(sql, table)
        if (rows > 0) held.push(`${table.name}: ${rows} rows`)
      }
      if (held.length > 0) {
        return yield* new MoveError({
          message: `target ${store.label} already holds data (${
            held.join(", ")
          }); it was left untouched. Copy into an empty database`
        })
      }
    }
    yield* Effect.provideService(
      runMigrations,
      SqlClient.SqlClient,
      sql
    )
    const after = yield* tablesOf(sql)
    return [...after].filter((name) => !before.has(name))
  })

/**
 * The target, opened to be written: on PostgreSQL a session of its own whose client COPY runs on
 * (`PostgresSession.ts`), on SQLite the store's file, created when missing.
 */
const openTarget = (
  store: Store
): Effect.Effect<
  { readonly sql: SqlClient.SqlClient; readonly copyClient: PostgresSession | undefined },
  MoveError,
  Scope.Scope
> =>
  store.engine === "postgres"
    ? openSession(store.url).pipe(
      Effect.map((session) => ({ sql: session.sql, copyClient: session })),
      Effect.mapError((error) => describeStoreFailure(store, "target", error))
    )
    : Effect.map(connect(store, { role: "target", mode: "create" }), (sql) => ({ sql, copyClient: undefined }))

export interface CopyResult {
  readonly lines: ReadonlyArray<string>
  readonly summary: string
  /** Set when the source took writes after the snapshot (while not read-only). */
  readonly note: Option.Option<string>
}

/**
 * Copies every table the service keeps from `from` into `to`: the source read in one snapshot
 * and never written, the target built from this build's migrations and written in one
 * transaction, its sequences set past the copied ids and checked, then every table's count and
 * checksum compared on both sides before the commit. Any failure leaves the target as it was
 * (or removes what the copy created in it, if the target answers: `CleanUp.ts`).
 */
export const copy = (from: Store, to: Store): Effect.Effect<CopyResult, MoveError> => {
  const created = { file: false, tables: [] as Array<string> }
  const onSource = Effect.mapError((error: unknown) => describeStoreFailure(from, "source", error))
  const onTarget = Effect.mapError((error: unknown) => describeStoreFailure(to, "target", error))
  return Effect.gen(function*() {
    if (sameStore(from, to)) {
      return yield* new MoveError({ message: `source and target are the same database (${from.label})` })
    }
    const source = yield* connect(from, { role: "source", mode: "read" })
    yield* onSource(requireKnownVersion(source, from, "source"))
    created.file = to.engine === "sqlite" && !existsSync(to.filename)
    const { copyClient, sql: target } = yield* openTarget(to)
    created.tables = yield* onTarget(prepareTarget(target, to))
    // The columns as the source holds them and this build's migrations made them on the target.
    const copiedTables = yield* columnsOnBothSides({ sql: source, store: from }, { sql: target, store: to }, "copied")

    // Writes that passed the check just before the flag was set reach the source before the snapshot.
    const since = yield* onSource(readOnlySince(source))
    if (Option.isSome(since)) {
      const now = yield* Clock.currentTimeMillis
      yield* Effect.sleep(Math.max(0, settleMillis - (now - since.value.getTime())))
    }

    const startedAt = performance.now()
    const snapshot = yield* onSource(Effect.catchDefect(
      inSnapshot(
        source,
        Effect.gen(function*() {
          const counts = yield* onSource(Effect.forEach(tables, (table) => countRows(source, table)))
          const sequences = sequencedTables(tables)
          const sourceNext = yield* onSource(Effect.forEach(sequences, (table) => nextId(source, table)))
          const total = counts.reduce((a, b) => a + b, 0)
          // Each client keeps its own transaction in the fiber: the source's reads stay in its
          // snapshot inside the target's transaction. A lost connection fails the transaction's
          // rollback too, which `effect/sql` makes a defect.
          return yield* onTarget(Effect.catchDefect(
            target.withTransaction(Effect.gen(function*() {
              const copying = makeProgress("copying", total)
              const sourceSums = new Map<string, Checksum>()
              for (const table of copiedTables) {
                const checksum = new Checksum()
                sourceSums.set(table.name, checksum)
                // The writer starts inside: a COPY in progress holds the session until it ends.
                const fill = Effect.flatMap(
                  tableWriter(target, table, copyClient),
                  (writer) =>
                    forEachPage(source, table, (rows) => {
                      checksum.add(rows)
                      return onTarget(writer.write(rows)).pipe(
                        Effect.tap(() => Effect.sync(() => copying.advance(rows.length)))
                      )
                    }).pipe(
                      Effect.andThen(onTarget(writer.end)),
                      Effect.onError(() => writer.abort)
                    )
                )
                yield* onTarget(withoutSecondaryIndexes(target, table.name, onSource(fill)))
              }
              const copied = copying.finish()
              const nextIds: Array<string> = []
              for (const [i, table] of sequences.entries()) {
                const highest = yield* onTarget(highestId(target, table))
                const wanted = Math.max(sourceNext[i]!, highest + 1)
                yield* onTarget(setNextId(target, table, wanted))
                const next = yield* onTarget(nextId(target, table))
                if (next <= highest || next < sourceNext[i]!) {
                  return yield* new MoveError({
                    message:
                      `target ${to.label}: the next ${table.name} id would be ${next}, not above the copied ids ` +
                      `(highest ${highest}, source's next ${sourceNext[i]}); nothing was committed`
                  })
                }
                nextIds.push(`next ${table.name} id ${next}`)
              }
              const verifying = makeProgress("verifying", total)
              const targetSums = yield* onTarget(checksums(target, copiedTables, verifying.advance))
              const verified = verifying.finish()
              const comparison = compare(sourceSums, targetSums)
              if (comparison.differing.length > 0) {
                return yield* new MoveError({
                  message: `verification failed: ${comparison.differing.join(", ")} differ between source and target ` +
                    `(${comparison.lines.join(" | ").replace(/\s+/g, " ")}); nothing was committed`
                })
              }
              return { comparison, copied, verified, nextIds, counts, sourceNext }
            })),
            Effect.fail
          ))
        })
      ),
      Effect.fail
    ))
    const seconds = (performance.now() - startedAt) / 1000

    // Writes after the snapshot are not on the target: fine for a rehearsal, a lost write at a switch.
    const countsNow = yield* onSource(Effect.forEach(tables, (table) => countRows(source, table)))
    const nextNow = yield* onSource(Effect.forEach(sequencedTables(tables), (table) => nextId(source, table)))
    const changed = tables.flatMap((table, i) =>
      countsNow[i] !== snapshot.counts[i] ? [`${table.name} ${countsNow[i]! - snapshot.counts[i]!} rows`] : []
    )
    const wrote = changed.length > 0 || nextNow.some((next, i) => next !== snapshot.sourceNext[i])
    if (wrote && Option.isSome(since)) {
      return yield* new MoveError({
        message:
          `the source took writes during the copy although it is read-only (${
            changed.join(", ") || "ids handed out"
          }): ` +
          "an instance did not see the flag, and the target misses them; copy again into an empty target"
      })
    }
    return {
      lines: snapshot.comparison.lines,
      summary:
        `copied ${snapshot.copied.rows} rows from ${engineName(from)} ${from.label} to ${engineName(to)} ${to.label} ` +
        `and verified them in ${seconds.toFixed(1)} s (copy ${snapshot.copied.seconds.toFixed(1)} s, verify ` +
        `${snapshot.verified.seconds.toFixed(1)} s); ${snapshot.nextIds.join(", ")}`,
      note: wrote
        ? Option.some(
          `note: the source took writes after the snapshot (${
            changed.join(", ") || "ids handed out"
          }); they are not on the ` +
            "target. Turn read-only on (npm run db -- read-only on) before the copy that precedes a switch"
        )
        : Option.none()
    }
  }).pipe(
    Effect.scoped,
    Effect.onError((cause) => cleanUp(to, created, cause))
  )
}
