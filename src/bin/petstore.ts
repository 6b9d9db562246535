/** The executable's entry: the service, or the command line argv[2] names, loaded alone as by its own script. */

/** `petstore VERSION (commit COMMIT)`, set by the build; absent when run from the sources. */
declare const PETSTORE_BUILD: string | undefined

const usage = `Usage: petstore [COMMAND]

With no command, serves the Pet Store (configured by its environment, docs/configuration.md).

Commands:
  keys …       Manage API keys (petstore keys --help)
  db …         Move, verify, back up, restore the database (petstore db --help)
  pets …       The command-line client (petstore pets --help)
  --version    The version and the commit this executable was built from
  --help       This text
`

const version = typeof PETSTORE_BUILD === "string" ? PETSTORE_BUILD : "petstore (from the sources, not a build)"
const command = process.argv[2]

// A module, so that it may await the command it loads.
export {}

// `keys` and `db` read their arguments from argv[2] on, as when run as `bun src/bin/keys.ts …`; `pets` is the client's.
if (command === "keys" || command === "db") process.argv.splice(2, 1)
if (command === undefined) await import("./main.js")
else if (command === "keys") await import("./keys.js")
else if (command === "db") await import("./db.js")
else if (command === "pets") await import("./cli.js")
else if (command === "--version") console.log(version)
else if (command === "--help" || command === "-h") process.stdout.write(usage)
else {
  process.stderr.write(`Unknown command '${command}': expected keys, db, pets, --version or --help, or none to serve\n`)
  process.exitCode = 1
}
