import * as path from 'node:path';
import type { Options } from '@grpc/proto-loader';

/**
 * The one set of proto-loader options used by the host's gRPC server, its tests and the demo
 * runner. They give the shapes the ts-proto types describe: snake_case field names, int64 as JS
 * numbers, enums as strings, scalar defaults filled in, and the `oneof` discriminator set.
 */
export const LOADER_OPTIONS: Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [protoRoot()],
};

/** Root folder of the .proto files: `proto/` in the repository, `dist/proto` once built. */
export function protoRoot(): string {
  // libs/proto/src (ts) and dist/libs/proto/src (js) are both three levels below their root.
  return path.resolve(__dirname, '..', '..', '..', 'proto');
}

export const RUNNERHOST_PROTO_FILES = ['runnerhost/v1/gateway.proto', 'runnerhost/v1/host_api.proto'];
export const HEALTH_PROTO_FILE = 'grpc/health/v1/health.proto';

/** Absolute paths of the proto files the host serves. */
export function protoPath(): string[] {
  return [...RUNNERHOST_PROTO_FILES, HEALTH_PROTO_FILE].map((f) => path.join(protoRoot(), f));
}
