#!/bin/sh
# Installs Bun from the npm package `bun` into .tools/, under the machine's npm configuration: its
# global, user and project npmrc, as npm run in this folder reads them. `npm install --prefix .tools`
# alone would read .tools/etc/npmrc as the global file and .tools/.npmrc as the project's, and miss
# a registry, proxy or CA certificate set in the real ones.
set -e
cd "$(dirname "$0")/.."
version=1.4.5

# One npm start for every setting: `name=value` lines.
settings=$(npm config get globalconfig userconfig registry fetch-timeout fetch-retries fetch-retry-mintimeout fetch-retry-maxtimeout)
setting() { printf '%s\n' "$settings" | sed -n "s/^$1=//p"; }
globalconfig=$(setting globalconfig)
userconfig=$(setting userconfig)
# Named on the screen, so without any credentials the address carries.
registry=$(setting registry | sed 's#//[^/@]*@#//#')

# npm's own bounds wait 5 minutes for each request and try it 3 times, so a registry or proxy that
# never answers shows nothing for 15 minutes. Where the configuration keeps npm's defaults, a
# request here gives up after 15 s and is tried twice, so a failure is told within the minute.
bound() { if [ "$(setting "$1")" = "$2" ]; then echo "$3"; else setting "$1"; fi; }
fetch_timeout=$(bound fetch-timeout 300000 15000)
fetch_retries=$(bound fetch-retries 2 1)
fetch_retry_mintimeout=$(bound fetch-retry-mintimeout 10000 1000)
fetch_retry_maxtimeout=$(bound fetch-retry-maxtimeout 60000 3000)

mkdir -p .tools
# npm --prefix reads the project's npmrc from the prefix: it is linked there for this install.
rm -f .tools/.npmrc
if [ -f .npmrc ]; then ln -s "$PWD/.npmrc" .tools/.npmrc; fi
echo "Installing Bun $version from $registry into .tools/ ..." >&2
if npm install bun@"$version" --prefix .tools --globalconfig "$globalconfig" --userconfig "$userconfig" \
  --fetch-timeout "$fetch_timeout" --fetch-retries "$fetch_retries" \
  --fetch-retry-mintimeout "$fetch_retry_mintimeout" --fetch-retry-maxtimeout "$fetch_retry_maxtimeout" \
  --loglevel error --no-save --no-package-lock --no-audit --no-fund --no-update-notifier >&2 &&
  .tools/node_modules/.bin/bun --version >/dev/null 2>&1; then
  rm -f .tools/.npmrc
  exit 0
fi
# Nothing half-installed is taken for Bun at the next start.
rm -f .tools/.npmrc .tools/node_modules/.bin/bun
echo "Could not install Bun $version from the npm registry $registry (npm's reason is above)." >&2
echo "npm's registry, proxy, https-proxy and cafile settings are read from $globalconfig, $userconfig and $PWD/.npmrc; or put Bun $version on PATH." >&2
exit 1
