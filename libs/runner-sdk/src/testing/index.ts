export { FakeHost, FakeRun } from './fake-host';
export type {
  FakeHandler,
  FakeHostCall,
  FakeHostOptions,
  FakeKnowledgeBase,
  FakeModel,
  FakeRunOutcome,
  FakeTool,
  StartOptions,
} from './fake-host';
/**
 * Protocol fault hooks of a run (docs/runner-sdk.md#protocol-fault-hooks): raw results past the
 * SDK's sequencing and terminal rule, and ignoring cancel. For test runners that must misbehave.
 */
export { faultsOf as protocolFaults } from '../faults';
export type { ProtocolFaults, RawResult } from '../faults';
