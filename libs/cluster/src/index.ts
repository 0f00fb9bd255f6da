export {
  assertChannel,
  MAX_SIGNAL_PAYLOAD_BYTES,
  SignalBusBase,
  type SignalBus,
  type SignalBusStats,
} from './signal-bus';
export { MemorySignalBus } from './memory-bus';
export { PostgresSignalBus, pgChannel, type PostgresBusOptions } from './postgres-bus';
export { NatsSignalBus, type NatsBusOptions } from './nats-bus';
export { createSignalBus, SIGNAL_BUS } from './bus-factory';
export { waitForTruth, type WaitOptions } from './wait';
export { ProcessRegistry, type DeadProcessListener } from './process-registry';
export { ClusterModule } from './cluster.module';
