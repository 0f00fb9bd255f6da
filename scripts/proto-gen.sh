#!/usr/bin/env bash
# Regenerates libs/proto/src/generated from proto/ with buf + ts-proto (both installed by npm ci).
set -euo pipefail
cd "$(dirname "$0")/.."
npx buf lint proto
rm -rf libs/proto/src/generated
npx buf generate proto --template proto/buf.gen.yaml
npx prettier --log-level warn --write libs/proto/src/generated
