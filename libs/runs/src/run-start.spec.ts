import type { AppConfig } from '@libs/config';
import type { StateService, TranscriptService } from '@libs/conversations';
import type { AgentEntity } from '@libs/persistence';
import type { RunnerDispatch } from '@libs/runner-gateway';
import type { ActiveRuns } from './active-runs';
import type { AdmissionCatalog } from './admission-catalog';
import type { EventSubmission } from './event-submission';
import type { RunLifecycleService } from './run-lifecycle.service';
import type { RunLeases } from './run-leases.service';
import { RunStarter, type LiveRunner } from './run-start';

const agent: AgentEntity = {
  agent_id: 'a1',
  workspace_id: 'default',
  runner_id: 'plugin:demo/echo/default',
  description: '',
  runner_config: {},
  resource_policy: {},
  state_policy: { enable_state: true, state_scopes: ['conversation', 'actor'] },
  delivery_policy: {},
  concurrency_policy: {},
  version: 1,
  created_at: 0,
  updated_at: 0,
};

const sub = (conversation_id: string): EventSubmission => ({
  agent_id: 'a1',
  event: { event_type: 'message.received', source: 'api' },
  conversation: { conversation_id, workspace_id: 'default' },
  actor: { actor_type: 'user', actor_id: 'u1' },
  input: { text: 'hi' },
});

const live = {
  session: { plugin_id: 'demo/echo' },
  runner: { name: 'echo', manifest: { capabilities: {}, permissions: { state: ['get'] } } },
} as unknown as LiveRunner;

/** RunStarter's preparation against fakes of the state and transcript reads. */
function setup() {
  const reads: string[] = [];
  const state = {
    snapshot: (keys: Record<string, string>, conversationId: string | null) => {
      reads.push(`state ${Object.keys(keys).join(',')} ${conversationId}`);
      return Promise.resolve({ conversation: { n: conversationId }, actor: {}, subject: {}, runner: {} });
    },
  } as unknown as StateService;
  const transcript = {
    latestSeq: (c: { conversation_id: string }) => {
      reads.push(`seq ${c.conversation_id}`);
      return Promise.resolve(c.conversation_id === 'c1' ? 7 : 9);
    },
  } as unknown as TranscriptService;
  const catalog = {
    resourceCatalog: () => Promise.resolve({ models: [], tools: [], knowledge_bases: [] }),
  } as unknown as AdmissionCatalog;
  const config = {
    hostApi: { maxPayloadBytes: 1, maxStorageValueBytes: 1, callsPerSecond: 1, burst: 1 },
  } as unknown as AppConfig;
  const starter = new RunStarter(
    catalog,
    {} as RunnerDispatch,
    {} as RunLifecycleService,
    {} as ActiveRuns,
    transcript,
    state,
    config,
    { owner: 'p1' } as unknown as RunLeases,
  );
  return { starter, reads };
}

describe("RunStarter reads ahead (the run's state and thread seq before the catalogue answers)", () => {
  it('reads by the same state keys the snapshot grants, and the preparation takes them without reading again', async () => {
    const { starter, reads } = setup();
    const ahead = starter.readAhead(sub('c1'), agent, live);
    expect(reads).toEqual(['state conversation,actor c1', 'seq c1']);
    const prepared = await starter.prepare('run-1', 'e-1', sub('c1'), agent, live, 1000, undefined, ahead);
    expect(reads).toHaveLength(2);
    expect(prepared.access.latest_seq).toBe(7);
    expect(prepared.access.state.conversation).toMatchObject({ n: 'c1' });
    expect(Object.keys(prepared.access.snapshot.state.scope_keys)).toEqual(['conversation', 'actor']);
  });

  it('reads again when what the preparation reads by differs (another conversation, another state policy)', async () => {
    const { starter, reads } = setup();
    const ahead = starter.readAhead(sub('c1'), agent, live);
    const other = await starter.prepare('run-2', 'e-2', sub('c2'), agent, live, 1000, undefined, ahead);
    expect(other.access.latest_seq).toBe(9);
    const narrower = { ...agent, state_policy: { state_scopes: ['conversation'] } };
    await starter.prepare('run-3', 'e-3', sub('c1'), narrower, live, 1000, undefined, ahead);
    expect(reads).toEqual([
      'state conversation,actor c1',
      'seq c1',
      'state conversation,actor c2',
      'seq c2',
      'state conversation c1',
      'seq c1',
    ]);
  });

  it('a failed read ahead that is not taken is not a failure; one taken fails the preparation', async () => {
    const { starter } = setup();
    const failing = { key: 'other', reads: Promise.reject(new Error('read failed')) };
    failing.reads.catch(() => undefined);
    await expect(
      starter.prepare('run-1', 'e-1', sub('c1'), agent, live, 1000, undefined, failing),
    ).resolves.toBeTruthy();
    const taken = starter.readAhead(sub('c1'), agent, live);
    const broken = { key: taken.key, reads: Promise.reject(new Error('read failed')) };
    broken.reads.catch(() => undefined);
    await expect(starter.prepare('run-2', 'e-2', sub('c1'), agent, live, 1000, undefined, broken)).rejects.toThrow(
      'read failed',
    );
  });
});
