"""Generated protobuf/gRPC stubs of proto/runnerhost (scripts/gen-stubs.sh)."""
