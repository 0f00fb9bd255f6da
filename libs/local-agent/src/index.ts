export * from './host-port';
export { runLocalAgent } from './run-local-agent';
