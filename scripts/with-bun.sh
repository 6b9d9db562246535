#!/bin/sh
# Runs a command with Bun and the locked dependencies installed, so that a machine with only
# Node.js and npm needs nothing else: Bun comes from the npm package `bun` when it is missing.
set -e
cd "$(dirname "$0")/.."
# Node runs npm and installs Bun; releases before 20 are not supported (package.json `engines`).
if command -v node >/dev/null 2>&1; then
  node_version=$(node --version 2>/dev/null || true)
  node_major=${node_version#v}
  node_major=${node_major%%.*}
  case $node_major in
    '' | *[!0-9]*) ;;
    *) if [ "$node_major" -lt 20 ]; then
      echo "petstore needs Node.js 20 or later; $(command -v node) is $node_version" >&2
      exit 1
    fi ;;
  esac
fi
if ! command -v bun >/dev/null 2>&1; then
  PATH="$PWD/.tools/node_modules/.bin:$PATH"
  export PATH
fi

# One command at a time installs Bun and the dependencies; another started meanwhile (the README's
# second terminal) waits for it, rather than installing into the same folders at once. The lock is
# a folder holding one named after its holder's process id: a lock whose holder is gone (an install
# killed) is taken over, its entry removed by one waiter only (rmdir succeeds once).
lock=.tools/install.lock
take_lock() {
  mkdir -p .tools
  told=
  empty=0
  while :; do
    if mkdir "$lock" 2>/dev/null; then
      # Fails only where another command found the lock empty for 10 s (this one stopped) and took it.
      if mkdir "$lock/$$" 2>/dev/null; then break; fi
      continue
    fi
    holder=$(ls "$lock" 2>/dev/null || true)
    if [ -z "$holder" ]; then
      # Released just now; or empty, its holder between its two steps, or stopped there for good after 10 s.
      [ -d "$lock" ] || continue
      empty=$((empty + 1))
      if [ "$empty" -gt 10 ] && rmdir "$lock" 2>/dev/null; then continue; fi
    else
      empty=0
      if ! kill -0 "$holder" 2>/dev/null && rmdir "$lock/$holder" 2>/dev/null && rmdir "$lock" 2>/dev/null; then continue; fi
      if [ -z "$told" ]; then
        echo "Waiting for another command (process $holder) to install Bun or the dependencies; if none runs, remove $PWD/$lock" >&2
        told=yes
      fi
    fi
    sleep 1
  done
  trap 'rmdir "$lock/$$" "$lock" 2>/dev/null' EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
release_lock() {
  rmdir "$lock/$$" "$lock" 2>/dev/null || true
  trap - EXIT HUP INT TERM
}

dependencies_missing() { [ ! -d node_modules ] || [ bun.lock -nt node_modules ]; }
if ! command -v bun >/dev/null 2>&1 || dependencies_missing || [ -d "$lock" ]; then
  take_lock
  # Looked at again, now that no other command installs: Bun by running it, since an install
  # killed half way can leave a link to nothing that runs.
  if ! bun --version >/dev/null 2>&1; then sh scripts/install-bun.sh; fi
  if dependencies_missing; then
    bun install --frozen-lockfile >&2
    touch node_modules
  fi
  release_lock
fi
PATH="$PWD/node_modules/.bin:$PATH"
export PATH
exec "$@"
