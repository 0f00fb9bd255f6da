import type { AppConfig } from '@libs/config';
import type { StateService, TranscriptService } from '@libs/conversations';
import type { AdmissionReadsRepository, AgentEntity, ConversationRef } from '@libs/persistence';
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

const conversation = (conversation_id: string): ConversationRef => ({
  key: `key-${conversation_id}`,
  agent_id: 'a1',
  runner_id: agent.runner_id,
  workspace_id: 'default',
  conversation_id,
  thread_id: null,
});

/** RunStarter's preparation against fakes of the state and transcript reads and of admission's one read. */
function setup() {
  const reads: string[] = [];
  const admissionReads = {
    roundTrips: true,
    read: (c: ConversationRef, thread: { conversation_id: string }, keys: string[], limit: number) => {
      reads.push(`one read ${c.key} ${thread.conversation_id} ${keys.length} keys ${limit}`);
      return Promise.resolve({
        situation: { running_run_id: null, queued_on_run: 0, waiting: 2 },
        latest_seq: 7,
        state: new Map(
          keys.map((k, i) => [k, i === 0 ? [{ state_key: 'n', value: JSON.stringify(thread.conversation_id) }] : []]),
        ),
      });
    },
  } as unknown as AdmissionReadsRepository;
  const state = {
    snapshot: (keys: Record<string, string>, conversationId: string | null) => {
      reads.push(`state ${Object.keys(keys).join(',')} ${conversationId}`);
      const out: Record<string, Record<string, unknown>> = { conversation: {}, actor: {}, subject: {}, runner: {} };
      if (keys.conversation) {
        out.conversation = { n: conversationId, 'external.conversation_id': conversationId };
      }
      return Promise.resolve(out);
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
    admissionReads,
  );
  return { starter, reads };
}

describe("RunStarter reads ahead (the run's state and thread seq before the catalogue answers)", () => {
  it("reads with the conversation's situation as one read, by the state keys the snapshot grants; the preparation takes them", async () => {
    const { starter, reads } = setup();
    const ahead = starter.readAhead(sub('c1'), agent, live, conversation('c1'));
    expect(reads).toEqual(['one read key-c1 c1 2 keys 100']);
    expect(await ahead.situation).toEqual({ running_run_id: null, queued_on_run: 0, waiting: 2 });
    const prepared = await starter.prepare('run-1', 'e-1', sub('c1'), agent, live, 1000, undefined, ahead.run);
    expect(reads).toHaveLength(1);
    expect(prepared.access.latest_seq).toBe(7);
    expect(prepared.access.state.conversation).toEqual({ n: 'c1', 'external.conversation_id': 'c1' });
    expect(Object.keys(prepared.access.snapshot.state.scope_keys)).toEqual(['conversation', 'actor']);
  });

  it('reads the same as the preparation reads by itself', async () => {
    const { starter } = setup();
    const ahead = starter.readAhead(sub('c1'), agent, live, conversation('c1'));
    const own = await starter.prepare('run-1', 'e-1', sub('c1'), agent, live, 1000);
    const taken = await starter.prepare('run-2', 'e-2', sub('c1'), agent, live, 1000, undefined, ahead.run);
    expect(taken.access.state).toEqual(own.access.state);
    expect(taken.access.latest_seq).toBe(own.access.latest_seq);
  });

  it('reads again for another scope, another agent entity (another state policy, or the same reloaded), no manifest', async () => {
    const { starter, reads } = setup();
    const ahead = starter.readAhead(sub('c1'), agent, live, conversation('c1'));
    const other = await starter.prepare('run-2', 'e-2', sub('c2'), agent, live, 1000, undefined, ahead.run);
    expect(other.access.latest_seq).toBe(9);
    const narrower = { ...agent, state_policy: { state_scopes: ['conversation'] } };
    const p3 = await starter.prepare('run-3', 'e-3', sub('c1'), narrower, live, 1000, undefined, ahead.run);
    expect(Object.keys(p3.access.snapshot.state.scope_keys)).toEqual(['conversation']);
    await starter.prepare('run-4', 'e-4', sub('c1'), { ...agent }, live, 1000, undefined, ahead.run);
    const gone = await starter.prepare('run-5', 'e-5', sub('c1'), agent, undefined, 1000, undefined, ahead.run);
    expect(gone.access.state).toEqual({});
    expect(reads).toEqual([
      'one read key-c1 c1 2 keys 100',
      'state conversation,actor c2',
      'seq c2',
      'state conversation c1',
      'seq c1',
      'state conversation,actor c1',
      'seq c1',
      'seq c1',
    ]);
  });

  it('a failed read ahead that is not taken is not a failure; one taken fails the preparation', async () => {
    const { starter } = setup();
    const other = starter.readAhead(sub('c2'), agent, live, conversation('c2'));
    const failing = { ...other.run, reads: Promise.reject(new Error('read failed')) };
    failing.reads.catch(() => undefined);
    await expect(
      starter.prepare('run-1', 'e-1', sub('c1'), agent, live, 1000, undefined, failing),
    ).resolves.toBeTruthy();
    const taken = starter.readAhead(sub('c1'), agent, live, conversation('c1'));
    const broken = { ...taken.run, reads: Promise.reject(new Error('read failed')) };
    broken.reads.catch(() => undefined);
    await expect(starter.prepare('run-2', 'e-2', sub('c1'), agent, live, 1000, undefined, broken)).rejects.toThrow(
      'read failed',
    );
  });
});
