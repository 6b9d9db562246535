import type { TestProject } from "vitest/node"
import { startPostgresCluster } from "./PostgresCluster.js"
import { freePort } from "./ServerProcess.js"

declare module "vitest" {
  export interface ProvidedContext {
    /** The throwaway cluster's admin database, for creating a database per test. */
    postgresUrl: string
  }
}

/** Starts one PostgreSQL cluster for the whole run and removes it afterwards. */
export default function setup(project: TestProject) {
  const cluster = startPostgresCluster(freePort())
  project.provide("postgresUrl", cluster.url)
  return () => cluster.stop()
}
