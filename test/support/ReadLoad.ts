/**
 * `count` reads of a page of five by `concurrency` callers at once: each one's duration in ms
 * (the median and the 99th percentile), and the statuses seen.
 */
export const readLoad = async (url: string, key: string, count: number, concurrency = 16) => {
  const durations: Array<number> = []
  const statuses = new Set<number>()
  let next = 0
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < count) {
      next++
      const start = performance.now()
      const response = await fetch(`${url}/v1/pets?limit=5`, { headers: { authorization: `Bearer ${key}` } })
      await response.arrayBuffer()
      durations.push(performance.now() - start)
      statuses.add(response.status)
    }
  }))
  durations.sort((a, b) => a - b)
  return { statuses, median: durations[Math.floor(count / 2)]!, p99: durations[Math.floor(count * 0.99)]! }
}
