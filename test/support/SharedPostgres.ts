import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { oncePerRun } from "./OncePerRun.js"
import { startPostgresCluster } from "./PostgresCluster.js"
import { postgresDataFile } from "./runSetup.js"
import { freePort } from "./ServerProcess.js"

let url: Promise<string> | undefined

/**
 * The URL of the run's PostgreSQL cluster (its `postgres` database, as superuser `petstore`),
 * started by the first test that asks for it and removed at the run's end (test/support/runSetup.ts):
 * a run with no test on PostgreSQL starts none.
 */
export const sharedPostgresUrl = (): Promise<string> =>
  url ??= oncePerRun("postgres", async (folder) => {
    const cluster = startPostgresCluster(freePort())
    writeFileSync(join(folder, postgresDataFile), cluster.dataDirectory)
    writeFileSync(join(folder, "postgres.url"), cluster.url)
  }).then((folder) => readFileSync(join(folder, "postgres.url"), "utf8"))
