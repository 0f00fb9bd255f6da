export { RunnerGatewayModule } from './runner-gateway.module';
export { PluginsService, pluginView, type PluginView } from './plugins.service';
export {
  RunnerConnections,
  type ConnectionChange,
  type RunnerSession,
  type ConnectedRunner,
  type InboundEvent,
} from './runner-connections';
export { RunnerPresence } from './runner-presence';
export { grpcErrorOf, grpcStatusErrorOf, GrpcStatusError, unexpectedError } from './grpc-error';
export { HOST_VERSION, ConnectSessionHandler } from './connect-session.handler';
export { connectHandler, serveConnect } from './connect.grpc';
export { HALF_OPEN_GRACE_MS } from './half-open';
export { RunnerDispatch, type RunnerTarget, type RunnerTransport } from './dispatch/runner-dispatch';
export { RunnerCatalogService, type RunnerView } from './runner-catalog.service';
export {
  isMalformed,
  malformedError,
  MalformedRequestInterceptor,
  tolerateMalformedRequests,
  wireBytes,
  type MalformedRequest,
} from './malformed-request';
export { directSerializer, encodeHostMessagesDirectly } from './direct-encoding';
export { decodeResultsDirectly, directResultDeserializer } from './direct-decoding';
