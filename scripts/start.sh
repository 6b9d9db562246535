#!/bin/sh
# `npm start`: builds when the sources changed, then becomes the server (exec), so that the
# process npm started is the server and a supervisor's SIGTERM or SIGINT reaches it.
set -e
cd "$(dirname "$0")/.."
sh scripts/build.sh --if-changed
# The build's own folder, not the link: workers started later run the same build as this process.
exec bun "$(readlink dist)/main.js"
