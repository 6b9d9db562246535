import { Cause, Duration, Effect, Fiber, Option } from "effect"
import { SqlClient } from "effect/sql"
import { existsSync } from "node:fs"
import { resolve } from "node:path"
import { runMigrations } from "../Sql/Migrations.js"
import { readOnlySince } from "../Sql/ReadOnlyMode.js"
import * as Ids from "./Ids.js"
import { Deadlines, endAbandoned, openSession, type PostgresSession } from "./PostgresSession.js"
import { knownVersion, requireKnownVersion, settled, tablesOf, versionOf } from "./SchemaVersion.js"
import { connect, engineName, failingAs, interruption, MoveError, removeWithCompanions, type Store } from "./Store.js"
import { type CopiedTable, countRows, forEachPage, movedRows, tables } from "./Tables.js"
import { Checksum, checksums, columnsOnBothSides, compare, inSnapshot, type Side } from "./Verify.js"
import { tableWriter, withoutSecondaryIndexes } from "./WriteRows.js"

/** The copy's progress: on a terminal, one line rewritten at most five times a second; piped, nothing. */
const makeProgress = (what: string, total: number) => {
  const startedAt = performance.now()
  const live = process.stderr.isTTY === true
  let [done, shownAt] = [0, 0]
  return {
    advance: (rows: number) => {
      done += rows
      const now = performance.now()
      if (!live || now - shownAt < 200) return
      shownAt = now
      const rate = done / ((now - startedAt) / 1000)
      const left = rate > 0 ? Math.max(0, (total - done) / rate) : 0
      process.stderr.write(
        `\r${what}: ${done.toLocaleString("en")} of ${total.toLocaleString("en")} rows, ` +
          `${Math.round(rate).toLocaleString("en")} rows/s, ${left.toFixed(0)} s left\x1b[K`
      )
    },
    finish: () => {
      if (live && shownAt > 0) process.stderr.write("\r\x1b[K")
      return { rows: done, seconds: (performance.now() - startedAt) / 1000 }
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
    const asBefore = `interrupted: nothing was committed, and the target ${store.label} is as it was before`
    if (store.engine === "sqlite" && created.file) removeWithCompanions(store.filename)
    if (created.file || created.tables.length === 0) return void (interruption.line = asBefore)
    const { connectMillis } = yield* Deadlines
    const removal = connect(store, { role: "target", mode: "write" }).pipe(
      Effect.tap((sql) => store.engine === "postgres" ? endAbandoned(sql, store.url) : Effect.void),
      Effect.flatMap((sql) => {
        const cascade = sql.onDialectOrElse({ pg: () => " CASCADE", orElse: () => "" })
        return Effect.forEach(created.tables, (name) => sql.unsafe(`DROP TABLE IF EXISTS "${name}"${cascade}`))
      }),
      Effect.scoped,
      // A target that answered a moment ago answers within it; interrupted, within the stop's bound.
      Effect.timeout(Cause.hasInterrupts(cause) ? 1_000 : Math.min(5_000, connectMillis)),
      Effect.as(true),
      Effect.orElseSucceed(() => false)
    )
    // In a fiber of its own: the copy unwinds uninterruptibly, where the bound could not cut the wait.
    const removed = yield* Effect.flatMap(Effect.forkDetach(removal, { uninterruptible: false }), Fiber.join)
    interruption.line = removed ? asBefore : `interrupted: nothing was committed; ${store.label} did not answer in ` +
      "time to remove the empty tables this copy made in it, and a copy into it again works"
  })

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
      // A replaced table's rows are the target's migrations' own.
      const held = (yield* Effect.forEach(
        tables.filter((table) => before.has(table.name) && table.replaced !== true),
        (table) => Effect.map(countRows(sql, table), (rows) => rows > 0 ? [`${table.name}: ${rows} rows`] : [])
      )).flat()
      if (held.length > 0) {
        return yield* refuse(
          `already holds data (${held.join(", ")}); it was left untouched. Copy into an empty database`
        )
      }
    }
    yield* Effect.provideService(runMigrations, SqlClient.SqlClient, sql)
    return [...(yield* tablesOf(sql))].filter((name) => !before.has(name))
  })

/** The source's row counts and next ids, to tell writes it took after the snapshot. */
const sourceState = (sql: SqlClient.SqlClient) =>
  Effect.all([
    Effect.forEach(tables, (table) => countRows(sql, table)),
    Effect.forEach(Ids.sequencedTables, (table) => Ids.nextId(sql, table))
  ])

/** Fills the target's tables in the transactions both sides have open: next ids past the copied ones, then checked. */
const fillTarget = (
  { sql: source, store: from }: Side,
  { sql: target, store: to }: Side,
  session: PostgresSession | undefined,
  copiedTables: ReadonlyArray<CopiedTable>
) =>
  Effect.gen(function*() {
    const [onSource, onTarget] = [failingAs(from, "source"), failingAs(to, "target")]
    const [counts, sourceNext] = yield* onSource(sourceState(source))
    const copying = makeProgress("copying", counts.reduce((a, b) => a + b, 0))
    const sourceSums = new Map(copiedTables.map((table) => [table.name, new Checksum()]))
    for (const table of copiedTables) {
      const checksum = sourceSums.get(table.name)!
      if (table.replaced === true) yield* onTarget(target.unsafe(`DELETE ${movedRows(table)}`))
      // The writer starts inside: a COPY in progress holds the session until it ends.
      const fill = Effect.flatMap(tableWriter(target, table, session), (writer) =>
        forEachPage(source, table, (rows) => {
          checksum.add(rows)
          copying.advance(rows.length)
          return onTarget(writer.write(rows))
        }).pipe(Effect.andThen(onTarget(writer.end)), Effect.onError(() => writer.abort)))
      yield* onTarget(withoutSecondaryIndexes(target, table.name, onSource(fill)))
    }
    const copied = copying.finish()
    // Next ids above every copied id and every id the source handed out.
    const raised = yield* onTarget(
      Ids.raiseNextIds(target, (table) => sourceNext[Ids.sequencedTables.indexOf(table)]! - 1)
    )
    const nextIds = raised.map(({ name, next }) => `next ${name} id ${next}`)
    const verifying = makeProgress("verifying", copied.rows)
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
  })

/** Copies a snapshot of `from` into `to` in one transaction; a failure removes what the copy made (`cleanUp`). */
export const copy = (from: Store, to: Store) => {
  const created = { file: false, tables: [] as Array<string> }
  const [onSource, onTarget] = [failingAs(from, "source"), failingAs(to, "target")]
  return Effect.gen(function*() {
    // True also if the stop's bound ends the process before the clean-up did.
    interruption.line = "interrupted: nothing was committed; the empty tables the copy may have made in " +
      `${to.label} may be left, and a copy into it again works`
    const sameFile = from.engine === "sqlite" && to.engine === "sqlite" &&
      resolve(from.filename) === resolve(to.filename)
    if (sameFile || from.label === to.label) {
      return yield* new MoveError({ message: `source and target are the same database (${from.label})` })
    }
    const source = yield* connect(from, { role: "source", mode: "read" })
    yield* onSource(requireKnownVersion(source, from, "source"))
    created.file = to.engine === "sqlite" && !existsSync(to.filename)
    const session = to.engine === "postgres" ? yield* onTarget(openSession(to.url)) : undefined
    const target = session?.sql ?? (yield* connect(to, { role: "target", mode: "create" }))
    created.tables = yield* onTarget(prepareTarget(target, to))
    const sides = [{ sql: source, store: from }, { sql: target, store: to }] as const
    const copiedTables = yield* columnsOnBothSides(...sides, "copied")
    // Writes that passed the check just before the flag was set reach the source before the snapshot.
    const since = yield* onSource(readOnlySince(source))
    if (Option.isSome(since)) yield* settled(since.value)
    // A lost connection fails the rollback too, which `effect/sql` makes a defect: caught back into a failure.
    const [took, snapshot] = yield* target.withTransaction(fillTarget(...sides, session, copiedTables)).pipe(
      Effect.catchDefect(Effect.fail),
      onTarget,
      (fill) => inSnapshot(source, fill),
      Effect.catchDefect(Effect.fail),
      onSource,
      Effect.timed
    )
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
    const lines = [
      ...snapshot.comparison.lines,
      `copied ${snapshot.copied.rows} rows from ${engineName(from)} ${from.label} to ${engineName(to)} ${to.label} ` +
      `and verified them in ${Duration.toSeconds(took).toFixed(1)} s ` +
      `(copy ${snapshot.copied.seconds.toFixed(1)} s, verify ${snapshot.verified.seconds.toFixed(1)} s); ` +
      snapshot.nextIds.join(", ")
    ]
    const note = `note: the source took writes after the snapshot (${what}); they are not on the target. ` +
      "Turn read-only on (npm run db -- read-only on) before the copy that precedes a switch"
    return { lines, note: wrote ? note : undefined }
  }).pipe(Effect.scoped, Effect.onError((cause) => cleanUp(to, created, cause)))
}
