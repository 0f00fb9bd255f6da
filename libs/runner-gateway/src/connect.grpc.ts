import type * as grpc from '@grpc/grpc-js';
import type { PackageDefinition } from '@grpc/proto-loader';
import type { HostMessage, PluginMessage } from '@libs/proto';
import type { ConnectSessionHandler } from './connect-session.handler';
import { resetWhenHalfOpen } from './half-open';
import { tickWriter } from './tick-writes';

const GATEWAY_SERVICE = 'runnerhost.v1.RunnerGatewayService';

/**
 * The Connect stream's gRPC adapter, a grpc-js bidi handler as it is (no framework RPC layer, no
 * stream of streams: docs/protocol.md#connecting-a-plugin): each inbound message is one call into
 * its session (ConnectSessionHandler, the one owner of the session's logic); the outbound ones go
 * through a tick writer (tick-writes.ts): the messages of one tick are one write on the call's
 * HTTP/2 stream, in order, and a status follows every message sent before it.
 */
export function connectHandler(
  sessions: ConnectSessionHandler,
): grpc.handleBidiStreamingCall<PluginMessage, HostMessage> {
  return (call) => {
    resetWhenHalfOpen(call);
    const writer = tickWriter(call);
    const stream = sessions.open(call.metadata, writer);
    call.on('data', stream.receive);
    call.on('end', stream.halfClosed);
    call.on('cancelled', () => {
      writer.closed();
      stream.closed();
    });
  };
}

/**
 * Serves RunnerGatewayService on `server` with connectHandler, and takes it out of the package
 * definition so that the framework does not register a handler of its own. Called with the
 * definition whose Connect (de)serializers are final (direct decoding and encoding, tolerant of
 * malformed requests).
 */
export function serveConnect(
  definition: PackageDefinition,
  server: grpc.Server,
  sessions: ConnectSessionHandler,
): void {
  const service = definition[GATEWAY_SERVICE];
  if (!service || 'format' in service) {
    throw new Error(`${GATEWAY_SERVICE} is not in the package definition`);
  }
  server.addService(service, { Connect: connectHandler(sessions) });
  delete definition[GATEWAY_SERVICE];
}
