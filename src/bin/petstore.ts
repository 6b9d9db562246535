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

const command = process.argv[2]

// A module, so that it may await the command it loads.
export {}

switch (command) {
  case undefined:
    await import("./main.js")
    break
  // Each reads its arguments from argv[2] on, as when run as `bun src/bin/keys.ts …`.
  case "keys":
    process.argv.splice(2, 1)
    await import("./keys.js")
    break
  case "db":
    process.argv.splice(2, 1)
    await import("./db.js")
    break
  // The client's own command line starts with `pets`.
  case "pets":
    await import("./cli.js")
    break
  case "--version":
    console.log(typeof PETSTORE_BUILD === "string" ? PETSTORE_BUILD : "petstore (from the sources, not a build)")
    break
  case "--help":
  case "-h":
    process.stdout.write(usage)
    break
  default:
    process.stderr.write(
      `Unknown command '${command}': expected keys, db, pets, --version or --help, or none to serve\n`
    )
    process.exitCode = 1
}
