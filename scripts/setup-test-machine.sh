#!/bin/sh
# What the tests run from Debian's packages, installed once before them (`npm test` runs this first):
# nothing is done when every probe file is there. As root, the missing packages are installed with
# apt-get; otherwise they are named, and the tests that need them fail saying to run this as root.
set -eu

missing=""
need() { # need PACKAGE PROBE...: PACKAGE is missing unless every PROBE exists (a glob may match).
  package=$1
  shift
  for probe in "$@"; do
    # shellcheck disable=SC2086 # the probe may be a glob
    set -- $probe
    if [ ! -e "$1" ]; then
      missing="$missing $package"
      return
    fi
  done
}

need postgresql '/usr/lib/postgresql/*/bin/initdb' /usr/bin/psql
need prometheus /usr/bin/prometheus /usr/bin/promtool
need chromium /usr/bin/chromium
need haproxy /usr/sbin/haproxy
need podman /usr/bin/podman
need runc /usr/sbin/runc
need debootstrap /usr/sbin/debootstrap
need strace /usr/bin/strace
need systemd /usr/bin/systemd-analyze /usr/lib/systemd/system/sysinit.target
need procps /usr/bin/pgrep
need iproute2 /usr/bin/ss

[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "Debian's packages missing for some tests:$missing. Install them as root with: sh scripts/setup-test-machine.sh" >&2
  exit 0
fi

echo "Installing Debian's packages for the tests:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update
# shellcheck disable=SC2086 # one word per package
apt-get install -y --no-install-recommends $missing
