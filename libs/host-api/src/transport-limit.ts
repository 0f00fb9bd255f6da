import type { AppConfig } from '@libs/config';

/** Headroom above the largest request the host API accepts; see grpcMessageLimit. */
export const TRANSPORT_HEADROOM_BYTES = 1024 * 1024;

/**
 * The gRPC message size limit of the server (receive and send). grpc-js refuses a larger message
 * itself, before any handler runs: RESOURCE_EXHAUSTED with no `x-error-code` and no audit row. So
 * the limit sits a whole MiB above the largest request the host API accepts (a storage value at
 * its limit, or HOSTAPI_MAX_PAYLOAD_BYTES): a request a little above the host's limit reaches the
 * guard, which refuses it as `payload_too_large` and audits it; only a request more than
 * TRANSPORT_HEADROOM_BYTES above it is refused by the transport (docs/security.md#wire-errors-grpc).
 */
export function grpcMessageLimit(config: Pick<AppConfig, 'hostApi'>): number {
  return Math.max(config.hostApi.maxPayloadBytes, config.hostApi.maxStorageValueBytes) + TRANSPORT_HEADROOM_BYTES;
}
