#!/usr/bin/env bash
# Fails, before anything is generated or deleted, when the tools of the Python stubs are missing:
# Debian's protoc (protobuf-compiler) and its gRPC Python plugin (protobuf-compiler-grpc). Run by
# gen-stubs.sh, check-stubs.sh and scripts/proto-check.sh first.
set -euo pipefail
missing=()
command -v protoc >/dev/null 2>&1 || missing+=("protoc (protobuf-compiler)")
[ -x /usr/bin/grpc_python_plugin ] || missing+=("/usr/bin/grpc_python_plugin (protobuf-compiler-grpc)")
if [ "${#missing[@]}" -gt 0 ]; then
  {
    echo "python stubs: missing $(printf '%s, ' "${missing[@]}" | sed 's/, $//')."
    echo "  Install them with: bash sdk/python/scripts/install-deps.sh"
    echo "  Nothing was generated, deleted or changed."
  } >&2
  exit 1
fi
