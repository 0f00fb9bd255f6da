export { HostApiModule } from './host-api.module';
export { HostApiGuard, type CallNeeds } from './host-api.guard';
export { grpcMessageLimit, TRANSPORT_HEADROOM_BYTES } from './transport-limit';
