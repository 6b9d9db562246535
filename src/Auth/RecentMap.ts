interface Entry<V> {
  readonly key: string
  value: V
  /** The next older and newer entries. */
  older: Entry<V> | undefined
  newer: Entry<V> | undefined
}

/**
 * A map that holds at most `capacity` entries, forgetting the least recently used first, and
 * drops entries that `isIdle` says are no longer worth keeping as it goes. State an attacker can
 * grow at will (a bucket per address, a cached key per guess) is kept in one of these, so memory
 * stays bounded whatever is sent.
 *
 * The order is a linked list beside the Map: finding the oldest by iterating the Map costs time
 * in the deleted entries Bun's Map keeps at its front, about 100 µs per new key at a capacity of
 * 100,000, which an address flood would pay on every request.
 */
export class RecentMap<V> {
  private readonly entries = new Map<string, Entry<V>>()
  private oldest: Entry<V> | undefined
  private newest: Entry<V> | undefined

  constructor(
    readonly capacity: number,
    private readonly isIdle: (value: V, now: number) => boolean
  ) {}

  get size(): number {
    return this.entries.size
  }

  /** The entry, now the most recently used. */
  get(key: string): V | undefined {
    const entry = this.entries.get(key)
    if (entry === undefined) return undefined
    this.unlink(entry)
    this.append(entry)
    return entry.value
  }

  set(key: string, value: V, now: number): void {
    this.delete(key)
    this.makeRoom(now)
    const entry: Entry<V> = { key, value, older: undefined, newer: undefined }
    this.entries.set(key, entry)
    this.append(entry)
  }

  delete(key: string): void {
    const entry = this.entries.get(key)
    if (entry === undefined) return
    this.entries.delete(key)
    this.unlink(entry)
  }

  /**
   * Room for one more: past the capacity the least recently used go, and idle entries among the
   * oldest few, so a sweep never stalls a request.
   */
  private makeRoom(now: number): void {
    while (this.oldest !== undefined && this.entries.size >= this.capacity) this.delete(this.oldest.key)
    let entry = this.oldest
    for (let looked = 0; looked < 2 && entry !== undefined; looked++) {
      const next: Entry<V> | undefined = entry.newer
      if (this.isIdle(entry.value, now)) this.delete(entry.key)
      entry = next
    }
  }

  private append(entry: Entry<V>): void {
    entry.older = this.newest
    entry.newer = undefined
    if (this.newest === undefined) this.oldest = entry
    else this.newest.newer = entry
    this.newest = entry
  }

  private unlink(entry: Entry<V>): void {
    if (entry.older === undefined) this.oldest = entry.newer
    else entry.older.newer = entry.newer
    if (entry.newer === undefined) this.newest = entry.older
    else entry.newer.older = entry.older
  }
}
