/**
 * A/B: two commits (or `.`, the working tree) built each in a folder of its own, compared on every
 * workload: on SQLite each on a copy of one store made by A's migrations (B opens a store A made,
 * as an upgrade would); on PostgreSQL each on a database of one cluster, B's a copy of A's.
 */
import { copyFileSync, mkdirSync, readFileSync, symlinkSync } from "node:fs"
import { join } from "node:path"
import { startPostgresCluster } from "../../test/support/PostgresCluster.js"
import { folder, only, pinToLoadCore, psql, root, run, seedPostgres, seedSqlite, workloads } from "./setup.js"
import { compare, printComparison } from "./wrk.js"

/** The sources of `ref` in a folder of their own, built: the folder, and the commit's short name. */
const checkout = (ref: string, name: string) => {
  const into = join(folder, name)
  const archive = join(folder, `${name}.tar`)
  mkdirSync(into)
  const commit = ref === "." ? undefined : run(["git", "rev-parse", "--verify", `${ref}^{commit}`])
  // The working tree as it is on disk: untracked files included, deleted ones left out.
  const workingTree = `git ls-files -co --exclude-standard -z | tar --null -T - --ignore-failed-read -cf ${archive}`
  run(["sh", "-c", commit === undefined ? workingTree : `git archive -o ${archive} ${commit}`])
  const label = commit?.slice(0, 7) ?? `${run(["git", "rev-parse", "--short", "HEAD"])}+working tree`
  run(["tar", "-xf", archive, "-C", into])
  // The same lockfile shares the installed packages; another is installed as it says.
  if (readFileSync(join(into, "bun.lock"), "utf8") === readFileSync(join(root, "bun.lock"), "utf8")) {
    symlinkSync(join(root, "node_modules"), join(into, "node_modules"))
  } else {
    run(["bun", "install", "--frozen-lockfile"], into)
  }
  run(["bun", "scripts/build.ts", "dist"], into)
  return { name, label, folder: into }
}

export const measureAb = async (refs: readonly [string, string]) => {
  const [a, b] = [checkout(refs[0], "A"), checkout(refs[1], "B")]
  console.log(`A = ${a.label} (${refs[0]}), B = ${b.label} (${refs[1]})`)
  // After the builds, which may use both cores.
  pinToLoadCore()
  const sides = (databaseUrls: readonly [string, string]) =>
    [a, b].map((side, i) => ({ name: side.name, cwd: side.folder, env: { DATABASE_URL: databaseUrls[i]! } }))
  const rows = []
  if (only !== "postgres") {
    const key = seedSqlite(join(folder, "seed.db"), a.folder)
    for (const side of ["A", "B"]) copyFileSync(join(folder, "seed.db"), join(folder, `${side}.db`))
    rows.push(
      ...await compare(
        "SQLite",
        key,
        sides([join(folder, "A.db"), join(folder, "B.db")]),
        [["B", "A"]],
        workloads(key, "sqlite")
      )
    )
  }
  if (only !== "sqlite") {
    const cluster = startPostgresCluster(3930)
    try {
      const { key, url } = seedPostgres(cluster.url, "petstore_a", a.folder)
      psql(cluster.url, "CREATE DATABASE petstore_b TEMPLATE petstore_a")
      const urls = [url, url.replace(/petstore_a$/, "petstore_b")] as const
      rows.push(...await compare("PostgreSQL", key, sides(urls), [["B", "A"]], workloads(key, "postgres")))
    } finally {
      cluster.stop()
    }
  }
  printComparison(rows)
  return { a: a.label, b: b.label, rows }
}
