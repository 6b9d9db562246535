import { Duration } from "effect"

/** How long a stop may run past its grace and drain: closing the server, the database and the trace export. */
export const stopMargin = Duration.seconds(2)

/**
 * The bound on a stop: the first signal arms a timer ending the process once it passes, since a
 * finalizer cannot be interrupted and a silent database would keep it alive. One per process.
 */
export const stopDeadline = (() => {
  let bound = stopMargin
  let armed = false
  return {
    set: (duration: Duration.Duration) => {
      bound = duration
    },
    arm: () => {
      if (armed) return
      armed = true
      // A little before the bound, for the exit itself: the process is gone by the bound.
      const millis = Math.max(0, Duration.toMillis(bound) - 250)
      // Unref'd: a stop that ends in time exits on its own, with its own code.
      setTimeout(() => {
        process.stdout.write(
          `${
            JSON.stringify({
              message: `stopping took longer than ${Duration.format(bound)}; exiting without waiting further`,
              logLevel: "ERROR",
              timestamp: new Date().toISOString()
            })
          }\n`
        )
        process.exit(1)
      }, millis).unref()
    }
  }
})()
