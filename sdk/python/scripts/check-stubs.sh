#!/usr/bin/env bash
# Fails when the committed Python stubs differ from what proto/ generates (like scripts/proto-check.sh).
# Generates into a scratch directory and compares: never deletes or rewrites a committed file,
# and fails first, naming install-deps.sh, when protoc or its gRPC Python plugin is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/require-tools.sh
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
bash scripts/gen-stubs.sh "$SCRATCH"
if ! diff -r -x __pycache__ "$SCRATCH/runnerhost" runner_host_sdk/_proto/runnerhost >&2; then
  echo "check-stubs: sdk/python/runner_host_sdk/_proto is out of date; run sdk/python/scripts/gen-stubs.sh and commit" >&2
  exit 1
fi
echo "check-stubs: Python stubs are up to date"
