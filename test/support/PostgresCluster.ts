import { spawnSync } from "node:child_process"
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { setupCommand } from "./DebianPackages.js"

/**
 * A throwaway PostgreSQL cluster for the tests: Debian's `postgresql` (installed by the set-up step),
 * `initdb` in a temporary folder and `pg_ctl start` on a loopback port. No Docker.
 */
export interface PostgresCluster {
  /** The cluster's `postgres` database, as superuser `petstore` (trust on loopback). */
  readonly url: string
  readonly dataDirectory: string
  /** `pg_ctl restart -m fast`: every session ended, the server back when it returns. */
  readonly restart: () => void
  readonly stop: () => void
}

/** A hot standby of a cluster, streaming from it, read-only until promoted. */
export interface PostgresStandby extends PostgresCluster {
  /** `pg_ctl promote`: the standby leaves recovery and takes writes; returns once it does. */
  readonly promote: () => void
}

const run = (command: string, args: ReadonlyArray<string>, asUser?: string) => {
  const [file, argv] = asUser === undefined ? [command, args] : ["runuser", ["-u", asUser, "--", command, ...args]]
  const result = spawnSync(file, argv, { encoding: "utf8" })
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} failed: ${result.error ?? ""}${result.stdout}${result.stderr}`)
  }
  return result.stdout
}

const isRoot = process.getuid?.() === 0

/** The newest installed server's bin folder; failing, naming the set-up command, when there is none. */
export const serverBin = (): string => {
  const find = () => {
    const versions = existsSync("/usr/lib/postgresql")
      ? readdirSync("/usr/lib/postgresql").filter((v) => existsSync(`/usr/lib/postgresql/${v}/bin/initdb`))
      : []
    const newest = versions.sort((a, b) => Number(b) - Number(a))[0]
    return newest === undefined ? undefined : `/usr/lib/postgresql/${newest}/bin`
  }
  const found = find()
  if (found !== undefined) return found
  throw new Error(`PostgreSQL is not installed (Debian's postgresql): run \`${setupCommand}\` as root, or \`npm test\``)
}

// The server refuses to run as root; as root, a cluster belongs to Debian's `postgres` user.
const user = isRoot ? "postgres" : undefined

/** A temporary folder the cluster's user owns. */
const clusterFolder = () => {
  const folder = mkdtempSync(join(tmpdir(), "petstore-pg-"))
  if (isRoot) chownSync(folder, Number(run("id", ["-u", "postgres"])), Number(run("id", ["-g", "postgres"])))
  return folder
}

/** The cluster in `folder`/data started on `port`, and how to restart and remove it. */
const started = (bin: string, folder: string, port: number, settings: string): PostgresCluster => {
  const data = join(folder, "data")
  try {
    run(join(bin, "pg_ctl"), [
      "-D",
      data,
      "-l",
      join(folder, "server.log"),
      "-w",
      "-t",
      "60",
      "-o",
      `-c listen_addresses=127.0.0.1 -p ${port} -k ${folder} -c fsync=off ${settings}`,
      "start"
    ], user)
  } catch (error) {
    rmSync(folder, { recursive: true, force: true })
    throw error
  }
  return {
    url: `postgres://petstore@127.0.0.1:${port}/postgres`,
    dataDirectory: data,
    restart: () =>
      void run(join(bin, "pg_ctl"), [
        "-D",
        data,
        "-l",
        join(folder, "server.log"),
        "-m",
        "fast",
        "-w",
        "-t",
        "60",
        "restart"
      ], user),
    stop: () => removeCluster(data)
  }
}

/** Stops the cluster whose data is in `data` if its server runs, and removes the folder that holds it. */
export const removeCluster = (data: string) => {
  const folder = dirname(data)
  try {
    if (existsSync(join(data, "postmaster.pid"))) {
      run(join(serverBin(), "pg_ctl"), ["-D", data, "-m", "immediate", "-w", "stop"], user)
    }
  } finally {
    rmSync(folder, { recursive: true, force: true })
  }
}

/**
 * `settings` are further `-c name=value` options of the server, this cluster's alone (a standby
 * made from it does not inherit them): `-c synchronous_standby_names=*` has every commit wait for
 * a standby.
 */
export const startPostgresCluster = (port: number, maxConnections = 300, settings = ""): PostgresCluster => {
  const bin = serverBin()
  const folder = clusterFolder()
  try {
    run(join(bin, "initdb"), [
      "-D",
      join(folder, "data"),
      "-U",
      "petstore",
      "-A",
      "trust",
      "-E",
      "UTF8",
      "--locale=C",
      "--no-sync"
    ], user)
  } catch (error) {
    rmSync(folder, { recursive: true, force: true })
    throw error
  }
  return started(bin, folder, port, `-c max_connections=${maxConnections} ${settings}`)
}

/**
 * A hot standby of `primary` on `port`: `pg_basebackup -R` (a copy of its data and the settings
 * to stream from it; `initdb` allows replication connections on loopback), started in recovery.
 */
export const startStandby = (primary: PostgresCluster, port: number): PostgresStandby => {
  const bin = serverBin()
  const folder = clusterFolder()
  const data = join(folder, "data")
  const from = new URL(primary.url)
  try {
    run(join(bin, "pg_basebackup"), [
      "-h",
      from.hostname,
      "-p",
      from.port,
      "-U",
      "petstore",
      "-D",
      data,
      "-R",
      "-X",
      "stream",
      "--no-sync"
    ], user)
  } catch (error) {
    rmSync(folder, { recursive: true, force: true })
    throw error
  }
  return {
    ...started(bin, folder, port, "-c max_connections=300"),
    promote: () => void run(join(bin, "pg_ctl"), ["-D", data, "-w", "-t", "60", "promote"], user)
  }
}
