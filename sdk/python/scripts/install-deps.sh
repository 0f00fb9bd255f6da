#!/usr/bin/env bash
# Installs the Debian packages of the Python SDK when missing (as root, or with sudo): grpcio and
# protobuf for Debian's /usr/bin/python3, protoc and its gRPC Python plugin for the stub check.
set -euo pipefail
if /usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null && command -v protoc >/dev/null && [ -x /usr/bin/grpc_python_plugin ]; then
  exit 0
fi
echo "python sdk: installing python3-grpcio python3-protobuf protobuf-compiler protobuf-compiler-grpc (apt-get)" >&2
SUDO=""
if [ "$(id -u)" != "0" ]; then
  SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-grpcio python3-protobuf protobuf-compiler protobuf-compiler-grpc >/dev/null
