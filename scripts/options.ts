/** The scripts' command-line arguments: `--name value` pairs and the rest. */
export const args = process.argv.slice(2)

/** The number after `name` on the command line, or `fallback` when it is absent. */
export const numberOption = (name: string, fallback: number): number => {
  const at = args.indexOf(name)
  return at === -1 ? fallback : Number(args[at + 1])
}
