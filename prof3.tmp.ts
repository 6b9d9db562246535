import { Database } from "bun:sqlite"
import { rmSync } from "node:fs"
for (const chunk of [1, 100, 500, 2000, 8000]) {
  rmSync("/tmp/mv/w3.db", { force: true })
  const db = new Database("/tmp/mv/w3.db")
  db.run("PRAGMA journal_mode = WAL")
  db.run("CREATE TABLE pets (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, category_id INTEGER NOT NULL, status TEXT CHECK (status IN ('available', 'pending', 'sold')))")
  const text = "INSERT INTO pets (id, name, category_id, status) VALUES " + Array.from({ length: chunk }, () => "(?, ?, ?, ?)").join(", ")
  const st = db.query(text)
  const t = performance.now()
  db.run("BEGIN")
  const n = 200000
  for (let i = 0; i < n; i += chunk) {
    const params: any[] = []
    for (let j = i; j < i + chunk; j++) params.push(j + 1, `pet ${j}`, j % 1000, "sold")
    st.run(...params)
  }
  db.run("COMMIT")
  console.log(chunk, ((performance.now() - t) * 5).toFixed(0), "ms per 1M")
  db.close()
}
