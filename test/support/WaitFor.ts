import { Effect } from "effect"

/** How long to wait, how often to look, and what is awaited (named in the error when the time runs out). */
export interface WaitOptions {
  /** What is awaited, as the error names it; a function is read when the wait fails, to say what was seen. */
  readonly what: string | (() => string)
  /** Milliseconds before giving up: 10 s unless told. */
  readonly timeout?: number
  /** Milliseconds between two looks: 25 unless told. */
  readonly interval?: number
}

/** What a condition answers when it holds: anything but `false`, `undefined` and `null`. */
export type Held<A> = Exclude<A, false | undefined | null>

// The one pause between looks in test/: every wait on a condition goes through this file.
const pause = (options: WaitOptions) => Bun.sleep(options.interval ?? 25)

const held = <A>(value: A): value is Held<A> => value !== false && value !== undefined && value !== null

const failure = (options: WaitOptions) => {
  const what = typeof options.what === "string" ? options.what : options.what()
  return new Error(`${what}: not within ${((options.timeout ?? 10_000) / 1000).toFixed(1)} s`)
}

/**
 * Looks at `condition` until it holds (answers anything but `false`, `undefined` or `null`) and
 * answers what it answered; throws, naming `what`, once `timeout` has passed. A condition that
 * throws ends the wait with its error (a process that exited will never answer).
 */
export const waitFor = async <A>(condition: () => A | Promise<A>, options: WaitOptions): Promise<Held<A>> => {
  for (const deadline = performance.now() + (options.timeout ?? 10_000);;) {
    const value = await condition()
    if (held(value)) return value
    if (performance.now() > deadline) throw failure(options)
    await pause(options)
  }
}

/**
 * `waitFor` for a condition written as an Effect, run in the caller's context. The looks are
 * spaced in real time, whatever clock the caller runs on: a TestClock moves only when told.
 */
export const waitForEffect = <A, E, R>(
  condition: Effect.Effect<A, E, R>,
  options: WaitOptions
): Effect.Effect<Held<A>, E, R> =>
  Effect.suspend(() => {
    const deadline = performance.now() + (options.timeout ?? 10_000)
    const look: Effect.Effect<Held<A>, E, R> = Effect.flatMap(condition, (value) =>
      held(value)
        ? Effect.succeed(value)
        : performance.now() > deadline
        ? Effect.die(failure(options))
        : Effect.andThen(Effect.promise(() => pause(options)), look))
    return look
  })
