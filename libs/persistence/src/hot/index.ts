export { HotStore } from './hot-store';
export { orderedUuid } from './ordered-id';
export { SQL, type HotStatement } from './hot-sql';
export { exec, one, rows, writtenJson, type Unit, type SqlValue } from './unit';
export {
  WriteQueue,
  DEFER_MS,
  MAX_DEFERRED,
  DatabaseBusyError,
  type Deferred,
  type WriterDriver,
  type WriterStats,
} from './write-queue';
export * from './run-units';
export * from './outbox-units';
export * from './steering-rows';
export * from './admission-decision';
export * from './admission-unit';
export * from './steering-queue-units';
export { joinSnapshot, splitSnapshot } from './snapshot-rows';
export * from './sender-units';
export {
  FencedError,
  isFenced,
  fenceUnit,
  fenceCallUnit,
  FENCE_RUN,
  FENCE_RUNS,
  FENCE_CALL,
  finishRunFenced,
  type RunLease,
} from './run-fence';
export {
  orphansUnit,
  takeOverUnit,
  LEASE_SQL,
  type OrphanRef,
  type TakeOver,
  type TakeOverOutcome,
} from './run-takeover';
export {
  claimInteractionUnit,
  closeInteractionUnit,
  insertInteractionUnit,
  INTERACTION_COLUMNS,
  INTERACTION_SQL,
  type InteractionFence,
} from './interaction-units';
