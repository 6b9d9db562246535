import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { TestProject } from "vitest/node"

declare module "vitest" {
  export interface ProvidedContext {
    /** The run's folder for what is built once and shared (test/support/Build.ts). */
    buildFolder: string
  }
}

/** The image built in the run, named in this file of the run's folder (test/support/Build.ts). */
export const imageNameFile = "image.name"

/**
 * Makes an empty folder for the run and removes it, with the image made in the run, at its end:
 * a run that builds nothing pays for a mkdir.
 */
export default function setup(project: TestProject) {
  const folder = mkdtempSync(join(tmpdir(), "petstore-run-"))
  project.provide("buildFolder", folder)
  return () => {
    const imageName = join(folder, imageNameFile)
    if (existsSync(imageName)) spawnSync("podman", ["rmi", "--force", readFileSync(imageName, "utf8").trim()])
    rmSync(folder, { recursive: true, force: true })
  }
}
