export { FakeHost, FakeRun } from './fake-host';
export type {
  FakeHandler,
  FakeHostOptions,
  FakeKnowledgeBase,
  FakeModel,
  FakeRunOutcome,
  FakeTool,
  StartOptions,
} from './fake-host';
