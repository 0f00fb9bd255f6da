export { HotStore } from './hot-store';
export { SQL, type HotStatement } from './hot-sql';
export { exec, one, rows, type Unit, type SqlValue } from './unit';
export { WriteQueue, type WriterDriver, type WriterStats } from './write-queue';
export * from './run-units';
export * from './outbox-units';
export * from './steering-rows';
export * from './steering-units';
export * from './steering-queue-units';
