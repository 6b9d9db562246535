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
  if [ ! -x .tools/node_modules/.bin/bun ]; then sh scripts/install-bun.sh; fi
  PATH="$PWD/.tools/node_modules/.bin:$PATH"
  export PATH
fi
if [ ! -d node_modules ] || [ bun.lock -nt node_modules ]; then
  bun install --frozen-lockfile >&2
  touch node_modules
fi
PATH="$PWD/node_modules/.bin:$PATH"
export PATH
exec "$@"
