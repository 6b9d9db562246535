/** The number after `name` on the command line, or `fallback` when it is absent. */
export const numberOption = (name: string, fallback: number): number => {
  const at = process.argv.indexOf(name, 2)
  return at === -1 ? fallback : Number(process.argv[at + 1])
}
