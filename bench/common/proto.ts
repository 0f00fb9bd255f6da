import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/*
 * The Runner Host protos as the bench clients and bare servers load them: the same loader options
 * as the host and the demo runner, so the bench encodes and decodes what they do.
 */

/** `proto/` of the repository, from bench/common/ and from dist/bench/common/ alike. */
export const PROTO_DIR = path.resolve(__dirname, '..', '..', 'proto');

/** Loads `files` (relative to proto/, e.g. 'runnerhost/v1/gateway.proto') into a grpc package object. */
export function loadProtos(files: string[]): grpc.GrpcObject {
  const definition = protoLoader.loadSync(files, {
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
    includeDirs: [PROTO_DIR],
  });
  return grpc.loadPackageDefinition(definition);
}
