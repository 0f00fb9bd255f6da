export { HostApiModule } from './host-api.module';
export { HostApiGate, type CallNeeds, type Caller } from './host-api.gate';
export { HostActions, type HostActionName, type RequestOf, type ResultOf } from './host-actions';
export { grpcMessageLimit, TRANSPORT_HEADROOM_BYTES } from './transport-limit';
export { InProcessHostPort } from './in-process/in-process-host-port';
export { HostApiGrpc, serveHostApi } from './host-api.grpc';
