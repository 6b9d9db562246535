/**
 * The copy's progress: on a terminal, one line rewritten at most five times a second (rows,
 * rows per second, time left); when piped, nothing until the summary the command prints.
 */
export const makeProgress = (what: string, total: number, stream: NodeJS.WriteStream = process.stderr) => {
  const startedAt = performance.now()
  let done = 0
  let shownAt = 0
  const live = stream.isTTY === true
  const elapsed = () => (performance.now() - startedAt) / 1000
  return {
    advance: (rows: number) => {
      done += rows
      if (!live) return
      const now = performance.now()
      if (now - shownAt < 200) return
      shownAt = now
      const seconds = elapsed()
      const rate = seconds > 0 ? done / seconds : 0
      const left = rate > 0 ? Math.max(0, (total - done) / rate) : 0
      stream.write(
        `\r${what}: ${done.toLocaleString("en")} of ${total.toLocaleString("en")} rows, ` +
          `${Math.round(rate).toLocaleString("en")} rows/s, ${left.toFixed(0)} s left\x1b[K`
      )
    },
    /** Clears the progress line; the rows and seconds, for the summary. */
    finish: () => {
      if (live && shownAt > 0) stream.write("\r\x1b[K")
      return { rows: done, seconds: elapsed() }
    }
  }
}
