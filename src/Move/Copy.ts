import { Cause, Clock, Effect, Fiber, Option } from "effect"
import { SqlClient } from "effect/sql"
import { existsSync, rmSync } from "node:fs"
import { resolve } from "node:path"
import { runMigrations } from "../Sql/Migrations.js"
import { readOnlySince, settleMillis } from "../Sql/ReadOnlyMode.js"
import { Deadlines } from "./Deadlines.js"
import { endAbandoned, openSession, type PostgresSession } from "./PostgresSession.js"
import {
  highestId,
  knownVersion,
  nextId,
  requireKnownVersion,
  sequencedTables,
  setNextId,
  tablesOf,
  versionOf
} from "./SchemaVersion.js"
import { connect, describeStoreFailure, engineName, interruption, MoveError, type Store } from "./Store.js"
import { countRows, tables } from "./Tables.js"
import { Checksum, checksums, columnsOnBothSides, compare, forEachPage, inSnapshot } from "./Verify.js"
import { tableWriter, withoutSecondaryIndexes } from "./WriteRows.js"

/** The copy's progress: on a terminal, one line rewritten at most five times a second; piped, nothing. */
const makeProgress = (what: string, total: number) => {
  const startedAt = performance.now()
  const elapsed = () => (performance.now() - startedAt) / 1000
  let [done, shownAt] = [0, 0]
  const live = process.stderr.isTTY === true
  return {
    advance: (rows: number) => {
      done += rows
      if (!live || performance.now() - shownAt < 200) return
      shownAt = performance.now()
      const rate = elapsed() > 0 ? done / elapsed() : 0
      const left = rate > 0 ? Math.max(0, (total - done) / rate) : 0
      process.stderr.write(
        `\r${what}: ${done.toLocaleString("en")} of ${total.toLocaleString("en")} rows, ` +
          `${Math.round(rate).toLocaleString("en")} rows/s, ${left.toFixed(0)} s left\x1b[K`
      )
    },
    /** Clears the progress line; the rows and seconds, for the summary. */
    finish: () => {
      if (live && shownAt > 0) process.stderr.write("\r\x1b[K")
      return { rows: done, seconds: elapsed() }
    }
  }
}

/** Removes the file or the tables a failed copy made (its rows were never committed); a silent target keeps them. */
const cleanUp = (
  store: Store,
  created: { readonly file: boolean; readonly tables: ReadonlyArray<string> },
  cause: Cause.Cause<unknown>
) =>
  Effect.gen(function*() {
    const interrupted = Cause.hasInterrupts(cause)
    const asBefore = () => {
      interruption.line = `interrupted: nothing was committed, and the target ${store.label} is as it was before`
    }
    if (store.engine === "sqlite" && created.file) {
      for (const suffix of ["", "-wal", "-shm", "-journal"]) rmSync(`${store.filename}${suffix}`, { force: true })
      return asBefore()
    }
    if (created.tables.length === 0) return asBefore()
    const { connectMillis } = yield* Deadlines
    const removal = connect(store, { role: "target", mode: "write" }).pipe(
      Effect.tap((sql) => store.engine === "postgres" ? endAbandoned(sql, store.url) : Effect.void),
      Effect.flatMap((sql) => {
        const cascade = sql.onDialectOrElse({ pg: () => " CASCADE", orElse: () => "" })
        return Effect.forEach(created.tables, (name) => sql.unsafe(`DROP TABLE IF EXISTS "${name}"${cascade}`), {
          discard: true
        })
      }),
      Effect.scoped,
      // A target that answered a moment ago answers within it; interrupted, within the stop's bound.
      Effect.timeoutOrElse({
        duration: interrupted ? 1_000 : Math.min(5_000, connectMillis),
        orElse: () => Effect.fail("late")
      }),
      Effect.as(true),
      Effect.orElseSucceed(() => false)
    )
    // In a fiber of its own: the copy unwinds uninterruptibly (and, stopped by a signal, is
    // already interrupted), where the bound could not cut the wait short.
    const removed = yield* Effect.flatMap(Effect.forkDetach(removal, { uninterruptible: false }), Fiber.join)
    if (removed) return asBefore()
    interruption.line =
      `interrupted: nothing was committed; ${store.label} did not answer in time to remove the empty ` +
      "tables this copy made in it, and a copy into it again works"
  })

/** Settings rows the target's own migrations write; a target holding only those is empty. */
const migrationSettings = new Set(["cursor_secret", "read_only"])

const sameStore = (a: Store, b: Store) =>
  a.engine === "sqlite" && b.engine === "sqlite" ? resolve(a.filename) === resolve(b.filename) : a.label === b.label

/** Refuses a target that holds anything, then builds its schema from this build's migrations; the tables it made. */
const prepareTarget = (sql: SqlClient.SqlClient, store: Store) =>
  Effect.gen(function*() {
    const before = yield* tablesOf(sql)
    const version = yield* versionOf(sql)
    const refuse = (what: string) => new MoveError({ message: `target ${store.label} ${what}` })
    if (Option.isNone(version) && before.size > 0) {
      const some = [...before].slice(0, 5).join(", ")
      return yield* refuse(
        `holds tables that are not the Pet Store's (${some}); it was left untouched. Copy into an empty database`
      )
    }
    if (Option.isSome(version)) {
      const known = yield* knownVersion
      if (version.value > known) {
        return yield* refuse(
          `has schema version ${version.value}, newer than the schema version ${known} this build knows; it was left untouched`
        )
      }
      const held: Array<string> = []
      for (const table of tables.filter((table) => before.has(table.name))) {
        const rows = table.name === "settings"
          ? (yield* sql<{ name: string }>`SELECT name FROM settings`).filter(({ name }) => !migrationSettings.has(name))
            .length
          : yield* countRows(sql, table)
        if (rows > 0) held.push(`${table.name}: ${rows} rows`)
      }
      if (held.length > 0) {
        const list = held.join(", ")
        return yield* refuse(`already holds data (${list}); it was left untouched. Copy into an empty database`)
      }
    }
    yield* Effect.provideService(runMigrations, SqlClient.SqlClient, sql)
    return [...(yield* tablesOf(sql))].filter((name) => !before.has(name))
  })

/** The source's row counts and next ids, to tell writes it took after the snapshot. */
const sourceState = (sql: SqlClient.SqlClient) =>
  Effect.all([
    Effect.forEach(tables, (table) => countRows(sql, table)),
    Effect.forEach(sequencedTables(tables), (table) => nextId(sql, table))
  ])

/**
 * Copies every table from a snapshot of `from` into `to`, built by this build's migrations, in one
 * transaction: sequences set past the copied ids, every table's count and checksum compared before
 * the commit. A failure leaves the target as it was, or removes what the copy made (`cleanUp`).
 */
export const copy = (from: Store, to: Store) => {
  const created = { file: false, tables: [] as Array<string> }
  const onSource = Effect.mapError((error: unknown) => describeStoreFailure(from, "source", error))
  const onTarget = Effect.mapError((error: unknown) => describeStoreFailure(to, "target", error))
  return Effect.gen(function*() {
    // True also if the stop's bound ends the process before the clean-up did.
    interruption.line = "interrupted: nothing was committed; the empty tables the copy may have made in " +
      `${to.label} may be left, and a copy into it again works`
    if (sameStore(from, to)) {
      return yield* new MoveError({ message: `source and target are the same database (${from.label})` })
    }
    const source = yield* connect(from, { role: "source", mode: "read" })
    yield* onSource(requireKnownVersion(source, from, "source"))
    created.file = to.engine === "sqlite" && !existsSync(to.filename)
    // On PostgreSQL, a session of its own whose client COPY runs on.
    const { copyClient, sql: target }: { sql: SqlClient.SqlClient; copyClient?: PostgresSession } =
      to.engine === "postgres"
        ? yield* onTarget(Effect.map(openSession(to.url), (session) => ({ sql: session.sql, copyClient: session })))
        : { sql: yield* connect(to, { role: "target", mode: "create" }) }
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
          const [counts, sourceNext] = yield* onSource(sourceState(source))
          // Each client keeps its own transaction in the fiber: the source's reads stay in its
          // snapshot inside the target's transaction. A lost connection fails the transaction's
          // rollback too, which `effect/sql` makes a defect.
          return yield* onTarget(Effect.catchDefect(
            target.withTransaction(Effect.gen(function*() {
              const copying = makeProgress("copying", counts.reduce((a, b) => a + b, 0))
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
                    }).pipe(Effect.andThen(onTarget(writer.end)), Effect.onError(() => writer.abort))
                )
                yield* onTarget(withoutSecondaryIndexes(target, table.name, onSource(fill)))
              }
              const copied = copying.finish()
              const nextIds: Array<string> = []
              for (const [i, table] of sequencedTables(tables).entries()) {
                const highest = yield* onTarget(highestId(target, table))
                yield* onTarget(setNextId(target, table, Math.max(sourceNext[i]!, highest + 1)))
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
              const verifying = makeProgress("verifying", copied.rows)
              const targetSums = yield* onTarget(checksums(target, copiedTables, verifying.advance))
              const verified = verifying.finish()
              const comparison = compare(sourceSums, targetSums)
              if (comparison.differing.length > 0) {
                const table = comparison.lines.join(" | ").replace(/\s+/g, " ")
                return yield* new MoveError({
                  message: `verification failed: ${comparison.differing.join(", ")} differ between source and target ` +
                    `(${table}); nothing was committed`
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
    const [countsNow, nextNow] = yield* onSource(sourceState(source))
    const changed = tables.flatMap((table, i) =>
      countsNow[i] !== snapshot.counts[i] ? [`${table.name} ${countsNow[i]! - snapshot.counts[i]!} rows`] : []
    )
    const what = changed.join(", ") || "ids handed out"
    const wrote = changed.length > 0 || nextNow.some((next, i) => next !== snapshot.sourceNext[i])
    if (wrote && Option.isSome(since)) {
      return yield* new MoveError({
        message: `the source took writes during the copy although it is read-only (${what}): ` +
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
        ? `note: the source took writes after the snapshot (${what}); they are not on the target. ` +
          "Turn read-only on (npm run db -- read-only on) before the copy that precedes a switch"
        : undefined
    }
  }).pipe(Effect.scoped, Effect.onError((cause) => cleanUp(to, created, cause)))
}
