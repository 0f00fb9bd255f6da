export * from './errors';
export * from './runner-id';
export * from './run-status';
export * from './manifest';
export * from './results';
export * from './config-schema';
export { describeIssues } from './zod-issues';
export * from './json-limits';
export * from './paging';
