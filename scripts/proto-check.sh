#!/usr/bin/env bash
# Fails when the committed generated code differs from what proto/ generates. Generates into a
# scratch directory and compares: never deletes or rewrites a committed file. `npm run proto:check`
# checks the Python stubs next (sdk/python/scripts/check-stubs.sh), so their tools (protoc, its gRPC
# Python plugin) are required first, before anything is generated.
set -euo pipefail
cd "$(dirname "$0")/.."
bash sdk/python/scripts/require-tools.sh
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
npx buf lint proto
npx buf generate proto --template proto/buf.gen.yaml --output "$SCRATCH"
npx prettier --log-level warn --config .prettierrc --write "$SCRATCH/libs/proto/src/generated"
if ! diff -r "$SCRATCH/libs/proto/src/generated" libs/proto/src/generated >&2; then
  echo "proto:check: libs/proto/src/generated is out of date; run npm run proto:gen and commit" >&2
  exit 1
fi
echo "proto:check: generated code is up to date"
