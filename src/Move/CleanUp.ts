import { Cause, Effect, Fiber } from "effect"
import { rmSync } from "node:fs"
import { Deadlines } from "./Deadlines.js"
import { endAbandoned } from "./PostgresSession.js"
import { connect, type Store } from "./Store.js"

/**
 * The line the db command prints when a signal stops it, kept true as a copy goes: printed when
 * the command's clean-up ends, or by the stop's bound if the clean-up still waits then
 * (`CommandLine/Run.ts`). One per process, as signals are.
 */
export const interruption = {
  line: "interrupted: nothing was left half-done (a copy's target is as it was before)"
}

/** What a copy made in its target: the SQLite file, or the tables its migrations made. */
export interface Created {
  readonly file: boolean
  readonly tables: ReadonlyArray<string>
}

/**
 * How long removing what a failed copy made may take: a target that answered a moment ago
 * answers within it, and one that stopped answering is not waited for (the copy has already
 * waited a statement's deadline for it). Interrupted, within the stop's bound.
 */
const boundMillis = (interrupted: boolean, connectMillis: number) =>
  interrupted ? 1_000 : Math.min(5_000, connectMillis)

/**
 * Removes what a failed copy created: the file it made, or the tables its migrations made. The
 * rows themselves are never committed: the copy's transaction rolls back, or ends with its session.
 * A target that does not answer in time keeps the empty tables; a copy into it again works.
 */
export const cleanUp = (store: Store, created: Created, cause: Cause.Cause<unknown>) =>
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
      Effect.flatMap((sql) =>
        Effect.forEach(
          created.tables,
          (name) =>
            sql.unsafe(
              `DROP TABLE IF EXISTS "${name}"${sql.onDialectOrElse({ pg: () => " CASCADE", orElse: () => "" })}`
            ),
          { discard: true }
        )
      ),
      Effect.scoped,
      Effect.timeoutOrElse({ duration: boundMillis(interrupted, connectMillis), orElse: () => Effect.fail("late") }),
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

/** The line while a copy runs: true also if the stop's bound ends the process before the clean-up did. */
export const copying = (store: Store) => {
  interruption.line = "interrupted: nothing was committed; the empty tables the copy may have made in " +
    `${store.label} may be left, and a copy into it again works`
}
