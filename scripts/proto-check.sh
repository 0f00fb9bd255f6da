#!/usr/bin/env bash
# Fails when the committed generated code differs from what proto/ generates.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/proto-gen.sh
if ! git diff --exit-code --stat -- libs/proto/src/generated || [ -n "$(git status --porcelain -- libs/proto/src/generated)" ]; then
  echo "proto:check: libs/proto/src/generated is out of date; run npm run proto:gen and commit" >&2
  exit 1
fi
echo "proto:check: generated code is up to date"
