#!/bin/sh
# The production build: one bundle with Bun's bytecode beside it, in a new folder under .build/,
# then `dist` is switched to it by a rename. A server running from the previous build keeps its
# files: they are never written again, and the folder stays while a process runs from it.
# With --if-changed, nothing is built when `dist` was built from the same sources, lockfile and Bun.
# With --if-changed (`npm start`), the executable dist/petstore is not made: a checkout runs main.js.
set -e
cd "$(dirname "$0")/.."

inputs=$(bun scripts/build-inputs.ts)

if [ "$1" = "--if-changed" ] && [ -f dist/.inputs ] && [ "$(cat dist/.inputs)" = "$inputs" ]; then
  exit 0
fi

mkdir -p .build
stamp=$(date +%Y%m%d%H%M%S)
build=.build/$stamp-$$
trap 'rm -rf "$build" ".build/link-$$"' EXIT
if [ "$1" = "--if-changed" ]; then bun scripts/build.ts "$build" --no-executable >&2; else bun scripts/build.ts "$build" >&2; fi
echo "$inputs" >"$build/.inputs"

# A folder left by an earlier build that wrote into `dist` itself moves aside: a rename keeps it whole.
if [ -d dist ] && [ ! -L dist ]; then mv dist ".build/$stamp-$$-old"; fi
ln -s "$build" ".build/link-$$"
# rename(2) replaces the link in one step: a start sees the old build or the new, never a mix.
bun -e 'require("node:fs").renameSync(process.argv[1], "dist")' ".build/link-$$"
trap - EXIT

# Earlier builds go once no process runs from them (Linux: their path in a command line).
previous=""
for old in $(ls -1d .build/*/ 2>/dev/null | LC_ALL=C sort -r); do
  old=${old%/}
  # Links are another build's switch in progress.
  [ "$old" = "$build" ] || [ -L "$old" ] && continue
  # The newest earlier build stays: a start may have just read the link to it.
  if [ -z "$previous" ]; then previous=$old; continue; fi
  [ -d /proc/self ] || continue
  grep -qsF "$old/" /proc/[0-9]*/cmdline || rm -rf "$old"
done
