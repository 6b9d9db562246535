/**
 * A map that holds at most `capacity` entries, forgetting the least recently used first, and
 * drops entries that `isIdle` says are no longer worth keeping as it goes. State an attacker can
 * grow at will (a bucket per address, a cached key per guess) is kept in one of these, so memory
 * stays bounded whatever is sent.
 */
export class RecentMap<V> {
  private readonly entries = new Map<string, V>()

  constructor(
    readonly capacity: number,
    private readonly isIdle: (value: V, now: number) => boolean
  ) {}

  get size(): number {
    return this.entries.size
  }

  /** The entry, now the most recently used. */
  get(key: string): V | undefined {
    const value = this.entries.get(key)
    if (value !== undefined) {
      // A Map iterates in insertion order: re-inserting makes it the newest.
      this.entries.delete(key)
      this.entries.set(key, value)
    }
    return value
  }

  set(key: string, value: V, now: number): void {
    this.entries.delete(key)
    this.makeRoom(now)
    this.entries.set(key, value)
  }

  delete(key: string): void {
    this.entries.delete(key)
  }

  /**
   * Room for one more: past the capacity the least recently used go, and idle entries among the
   * oldest few, so a sweep never stalls a request.
   */
  private makeRoom(now: number): void {
    let looked = 0
    for (const [key, value] of this.entries) {
      if (this.entries.size >= this.capacity) this.entries.delete(key)
      else if (looked++ === 2) break
      else if (this.isIdle(value, now)) this.entries.delete(key)
    }
  }
}
