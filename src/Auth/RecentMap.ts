/**
 * At most `capacity` entries, least recent dropped first, idle ones swept two per new key: for state an attacker can
 * grow (a bucket per address, a key per guess). Two maps as in hashlru: an exact order pins an object per entry.
 */
export class RecentMap<V> {
  private recent = new Map<string, V>()
  private older = new Map<string, V>()
  private readonly half: number
  private sweep: Iterator<[string, V]> = this.older.entries()

  constructor(readonly capacity: number, private readonly isIdle: (value: V, now: number) => boolean) {
    if (!(capacity >= 2)) throw new RangeError(`a RecentMap holds at least 2 entries, not ${capacity}`)
    this.half = Math.floor(capacity / 2)
  }

  get size(): number {
    return this.recent.size + this.older.size
  }

  get(key: string): V | undefined {
    const value = this.recent.get(key)
    if (value !== undefined) return value
    const older = this.older.get(key)
    if (older === undefined) return undefined
    this.older.delete(key)
    this.add(key, older)
    return older
  }

  set(key: string, value: V, now: number): void {
    if (this.recent.has(key)) {
      this.recent.set(key, value)
      return
    }
    const known = this.older.delete(key)
    this.add(key, value)
    if (known) return
    for (let looked = 0; looked < 2; looked++) {
      const next = this.sweep.next()
      if (next.done) return
      if (this.isIdle(next.value[1], now)) this.older.delete(next.value[0])
    }
  }

  delete(key: string): void {
    if (!this.recent.delete(key)) this.older.delete(key)
  }

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
}
