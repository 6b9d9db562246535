/**
 * A map that holds at most `capacity` entries, forgetting the least recently used first, and
 * drops entries that `isIdle` says are no longer worth keeping as it goes. State an attacker can
 * grow at will (a bucket per address, a cached key per guess) is kept in one of these, so memory
 * stays bounded whatever is sent.
 *
 * It is two plain maps, as in hashlru: entries read or written go to the recent half; when that
 * holds half the capacity it becomes the older half and the older one is dropped whole, so what
 * is dropped was always used less recently than anything kept, and between half the capacity and
 * all of it is kept. An exact order (a linked list of entry objects beside one map) put an object
 * per entry among each request's garbage, and the collector could hand back none of the blocks
 * those pinned: a million addresses grew the resident memory of the in-memory rate limiter by
 * 62–106 MiB, against 16–23 MiB now, where an entry is the map's slots, the key and the value.
 *
 * Idle entries of the older half are swept two per new key by an iterator made when the half
 * turned older, so a sweep never rescans what it has passed (a map keeps deleted slots at its
 * front until it grows: finding the oldest from the start on every new key cost 100 µs at
 * 100,000). Idle entries of the recent half wait for it to turn older.
 */
export class RecentMap<V> {
  private recent = new Map<string, V>()
  private older = new Map<string, V>()
  private readonly half: number
  private sweep: Iterator<[string, V]> = this.older.entries()

  constructor(
    readonly capacity: number,
    private readonly isIdle: (value: V, now: number) => boolean
  ) {
    if (!(capacity >= 2)) throw new RangeError(`a RecentMap holds at least 2 entries, not ${capacity}`)
    this.half = Math.floor(capacity / 2)
  }

  get size(): number {
    return this.recent.size + this.older.size
  }

  /** The entry, now among the most recently used. */
  get(key: string): V | undefined {
    const value = this.recent.get(key)
    if (value !== undefined) return value
    const older = this.older.get(key)
    if (older === undefined) return undefined
    this.older.delete(key)
    this.add(key, older)
    return older
  }

  /** Sets the entry, now among the most recently used. */
  set(key: string, value: V, now: number): void {
    if (this.recent.has(key)) {
      this.recent.set(key, value)
      return
    }
    const known = this.older.delete(key)
    this.add(key, value)
    if (!known) this.sweepIdle(now)
  }

  delete(key: string): void {
    if (!this.recent.delete(key)) this.older.delete(key)
  }

  /** Forgets every entry. */
  clear(): void {
    this.recent = new Map()
    this.older = new Map()
    this.sweep = this.older.entries()
  }

  private add(key: string, value: V): void {
    if (this.recent.size >= this.half) {
      this.older = this.recent
      this.recent = new Map()
      this.sweep = this.older.entries()
    }
    this.recent.set(key, value)
  }

  private sweepIdle(now: number): void {
    for (let looked = 0; looked < 2; looked++) {
      const next = this.sweep.next()
      if (next.done) return
      if (this.isIdle(next.value[1], now)) this.older.delete(next.value[0])
    }
  }
}
