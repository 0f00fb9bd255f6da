#!/usr/bin/env bash
# Fails when the committed Python stubs differ from what proto/ generates (like scripts/proto-check.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/gen-stubs.sh
if ! git diff --exit-code --stat -- runner_host_sdk/_proto || [ -n "$(git status --porcelain -- runner_host_sdk/_proto)" ]; then
  echo "check-stubs: sdk/python/runner_host_sdk/_proto is out of date; run sdk/python/scripts/gen-stubs.sh and commit" >&2
  exit 1
fi
echo "check-stubs: Python stubs are up to date"
