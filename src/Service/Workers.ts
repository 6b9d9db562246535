import { type Duration, Effect, Exit, Schedule } from "effect"

/** Set in a worker's environment: its number, and the supervisor's process id, which its parent must stay. */
export const workerVariable = "PETSTORE_WORKER"
const supervisorVariable = "PETSTORE_SUPERVISOR_PID"

/** One worker process, this program with `PETSTORE_WORKER` set; interrupted, it sends SIGTERM and waits. */
const runWorker = (worker: number, env: Record<string, string>, stopTimeout: Duration.Input) =>
  Effect.acquireUseRelease(
    Effect.sync(() =>
      // This same program; in Bun's compiled executable argv[1] is its embedded entry (`/$bunfs/…`).
      Bun.spawn([process.execPath, ...process.argv.slice(Bun.main.startsWith("/$bunfs/") ? 2 : 1)], {
        env: { ...process.env, ...env, [workerVariable]: String(worker), [supervisorVariable]: String(process.pid) },
        stdio: ["ignore", "inherit", "inherit"]
      })
    ),
    (proc) =>
      Effect.logInfo("worker started").pipe(
        Effect.annotateLogs({ worker, pid: proc.pid }),
        Effect.andThen(Effect.promise(() => proc.exited))
      ),
    (proc, exit) =>
      Exit.hasInterrupts(exit)
        // Interruptible: a release runs uninterruptibly, where the timeout could not end the wait.
        ? Effect.interruptible(Effect.promise(() => {
          proc.kill("SIGTERM")
          return proc.exited
        })).pipe(Effect.timeoutOrElse({ duration: stopTimeout, orElse: () => Effect.sync(() => proc.kill("SIGKILL")) }))
        : Effect.void
  )

/** Keeps `count` workers running, each restarted a second after it exits; interrupted, stops them all. */
export const supervise = (count: number, env: Record<string, string>, stopTimeout: Duration.Input) =>
  Effect.forEach(
    Array.from({ length: count }, (_, index) => index + 1),
    (worker) =>
      runWorker(worker, env, stopTimeout).pipe(
        Effect.tap((code) =>
          Effect.logWarning("worker exited; starting it again in 1 second").pipe(Effect.annotateLogs({ worker, code }))
        ),
        Effect.repeat(Schedule.spaced("1 second"))
      ),
    { concurrency: "unbounded", discard: true }
  )

/** In a worker: stops it (as SIGTERM would) once its supervisor is gone, so no orphan serves the port. */
export const stopWhenOrphaned = Effect.suspend(() => {
  // From the environment, not the parent at this moment: the supervisor may already be gone.
  const supervisor = Number(process.env[supervisorVariable])
  return Effect.repeat(Effect.sync(() => process.ppid), {
    until: (parent) => parent !== supervisor,
    schedule: Schedule.spaced("1 second")
  }).pipe(Effect.andThen(Effect.sync(() => process.kill(process.pid, "SIGTERM"))))
})
