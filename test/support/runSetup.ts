import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { TestProject } from "vitest/node"
import { removeCluster } from "./PostgresCluster.js"

declare module "vitest" {
  export interface ProvidedContext {
    /** The run's folder for what is made once and shared (test/support/OncePerRun.ts). */
    runFolder: string
  }
}

/** The image built in the run, named in this file of the run's folder (test/support/Build.ts). */
export const imageNameFile = "image.name"
/** The data folder of the PostgreSQL cluster started in the run, named in this file of the run's folder (test/support/SharedPostgres.ts). */
export const postgresDataFile = "postgres.data"

/**
 * Makes an empty folder for the run and, at its end, removes what the run's tests made once (the
 * PostgreSQL cluster, stopped; the container image) and the folder: a run that needs neither pays
 * for a mkdir.
 */
export default function setup(project: TestProject) {
  const folder = mkdtempSync(join(tmpdir(), "petstore-run-"))
  project.provide("runFolder", folder)
  return () => {
    const file = (name: string) => join(folder, name)
    try {
      if (existsSync(file(postgresDataFile))) removeCluster(readFileSync(file(postgresDataFile), "utf8"))
    } finally {
      if (existsSync(file(imageNameFile))) {
        spawnSync("podman", ["rmi", "--force", readFileSync(file(imageNameFile), "utf8").trim()])
      }
      rmSync(folder, { recursive: true, force: true })
    }
  }
}
