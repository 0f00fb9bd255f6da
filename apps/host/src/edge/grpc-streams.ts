import type { AppConfig } from '@libs/config';

/**
 * gRPC server options beyond Nest's: a bound on concurrent streams per connection (grpc-js
 * advertises unlimited by default). No server interceptor: one would wrap every call and every
 * message of it; the Connect handler resets a half-open stream itself (libs/runner-gateway
 * half-open.ts, docs/protocol.md#wire-conventions).
 */
export function grpcServerOptions(config: AppConfig): Record<string, unknown> {
  return {
    'grpc.max_concurrent_streams': config.grpc.maxConcurrentStreams,
  };
}
