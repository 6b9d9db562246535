const rows: Array<Array<string|null>> = []
for (let i = 0; i < 1000000; i++) rows.push([String(i), `pet ${i} "q" \\ {x}`, String(i % 1000), i % 4 ? "sold" : null])
const enc = (r: Array<string|null>) => { let s = ""; for (const v of r) s += v === null ? "\u0001" : v.length + ":" + v; return s }
for (let k = 0; k < 2; k++) {
let t = performance.now()
for (const r of rows) enc(r)
console.log("concat", performance.now() - t); t = performance.now()
let a = 0n
for (let i = 0; i < rows.length; i += 20000) { let s = a; for (let j = i; j < i + 20000; j++) s += BigInt(Bun.hash(enc(rows[j]!))); a = BigInt.asUintN(64, s) }
console.log("bigint per page", performance.now() - t); t = performance.now()
let lo = 0, hi = 0
for (const r of rows) { const s = enc(r); lo += Bun.hash.xxHash32(s); hi += Bun.hash.crc32(s); if (lo > 2**52) lo %= 4294967296; if (hi > 2**52) hi %= 4294967296 }
console.log("2x32", performance.now() - t); t = performance.now()
for (const r of rows) { const s = enc(r); Bun.hash.xxHash32(s) }
console.log("xx32", performance.now() - t); t = performance.now()
}
