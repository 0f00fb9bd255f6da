#!/usr/bin/env bash
# Generates the Python protobuf and gRPC stubs of proto/runnerhost/v1 into runner_host_sdk/_proto.
# Debian's protoc (protobuf-compiler) for the messages and its gRPC Python plugin
# (protobuf-compiler-grpc: /usr/bin/grpc_python_plugin) for the services. Debian's python3-grpc-tools
# is not used: its bundled protoc (grpc 1.14) predates proto3 `optional` fields. Imports are rewritten to be package-relative, so the stubs
# never need a top-level `runnerhost` on sys.path.
# Usage: gen-stubs.sh [OUT] (default runner_host_sdk/_proto; check-stubs.sh passes a scratch directory).
# The stubs are generated into a scratch directory first; OUT is replaced only once that succeeded.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/require-tools.sh
REPO="$(cd ../.. && pwd)"
OUT="${1:-runner_host_sdk/_proto}"
FINAL="$OUT"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
OUT="$SCRATCH"
mkdir -p "$OUT"
protoc -I "$REPO/proto" --python_out="$OUT" --pyi_out="$OUT" \
  runnerhost/v1/context.proto runnerhost/v1/gateway.proto runnerhost/v1/host_api.proto
protoc -I "$REPO/proto" --plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin --grpc_python_out="$OUT" \
  runnerhost/v1/gateway.proto runnerhost/v1/host_api.proto
for f in "$OUT"/runnerhost/v1/*.py "$OUT"/runnerhost/v1/*.pyi; do
  sed -i -E 's/^from runnerhost\.v1 import /from runner_host_sdk._proto.runnerhost.v1 import /' "$f"
done
touch "$OUT/runnerhost/__init__.py" "$OUT/runnerhost/v1/__init__.py"
mkdir -p "$FINAL"
rm -rf "$FINAL/runnerhost"
cp -R "$OUT/runnerhost" "$FINAL/runnerhost"
