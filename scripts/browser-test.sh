#!/usr/bin/env bash
# The headless-Chromium tests (test/e2e/*.browser-spec.ts): installs Debian's chromium when it is
# missing (as root, or with sudo), then runs them against dist/ (build first: `npm run build`).
set -euo pipefail
cd "$(dirname "$0")/.."

CHROMIUM="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
  echo "browser tests: installing chromium (apt-get)" >&2
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
"$CHROMIUM" --version >&2

npx jest --selectProjects browser --runInBand
