export { HostApiModule } from './host-api.module';
export { HostApiGuard, type CallNeeds } from './host-api.guard';
