export * from './proto-path';
export * from './generated/runnerhost/v1/context';
export * from './generated/runnerhost/v1/gateway';
export * from './generated/runnerhost/v1/host_api';
export * as health from './generated/grpc/health/v1/health';
export { NOT_PLAIN, plainEncoder, protoType, type PlainEncoder } from './plain-encoder';
// Last: replaces the Struct wrapper the generated modules register (see json-wrappers.ts).
export { jsonValueMessage } from './json-wrappers';
