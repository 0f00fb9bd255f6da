import type { PackageDefinition } from '@grpc/proto-loader';
import { plainEncoder, protoType } from '@libs/proto';

/** The Connect stream in the loaded package definition. */
const CONNECT = { service: 'runnerhost.v1.RunnerGatewayService', method: 'Connect' };

/**
 * The Connect stream's `HostMessage`s (a run's whole context, once per run) encoded directly from
 * the plain message, without proto-loader's `fromObject` copy into protobufjs messages first
 * (docs/benchmarks.md#host-cpu-per-run-at-c64-issue-16-round-5-wt-hostcpu). Same bytes: a message
 * the direct encoder does not write as `fromObject` + `encode` would (NOT_PLAIN) goes to the
 * serializer it replaces. Passed to the Nest gRPC server in `onLoadPackageDefinition`.
 */
export function encodeHostMessagesDirectly(definition: PackageDefinition): void {
  const service = definition[CONNECT.service];
  if (!service || 'format' in service || !service[CONNECT.method]) {
    throw new Error(`${CONNECT.service}.${CONNECT.method} is not in the package definition`);
  }
  const method = service[CONNECT.method];
  method.responseSerialize = directSerializer(method.responseSerialize);
}

/** HostMessage bytes by the direct encoder, by `fallback` for anything it does not write itself. */
export function directSerializer(fallback: (value: object) => Buffer): (value: object) => Buffer {
  const encode = plainEncoder(protoType('runnerhost/v1/gateway.proto', 'runnerhost.v1.HostMessage'));
  return (value) => {
    try {
      return encode(value);
    } catch {
      return fallback(value);
    }
  };
}
