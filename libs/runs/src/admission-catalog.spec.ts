import type { AgentsService } from '@libs/agents';
import { CatalogVersions, type ResourceCatalog } from '@libs/authz';
import { MemorySignalBus } from '@libs/cluster';
import type { AgentEntity, CatalogVersionRepository, ConversationRef, ConversationSituation } from '@libs/persistence';
import { AdmissionCatalog } from './admission-catalog';
import { WorkspaceAdmission } from './workspace-admission';
import type { EventSubmission } from './event-submission';

const busy: ConversationSituation = { running_run_id: 'run-busy', queued_on_run: 0, waiting: 0 };

const agentIn = (workspace: string): AgentEntity =>
  ({ agent_id: 'agent-1', runner_id: 'plugin:acme/echo/default', workspace_id: workspace }) as unknown as AgentEntity;

const message: EventSubmission = {
  agent_id: 'agent-1',
  event: { event_type: 'message.received', source: 'api' },
  conversation: { conversation_id: 'c1' },
  input: { text: 'hello' },
};

/**
 * The catalogue's version read and the conversation's situation as one statement
 * (AdmissionCatalog.agentWithSituation, through WorkspaceAdmission.derive): which reads are sent.
 */
function setup() {
  const sent: string[] = [];
  const store = {
    version: 1,
    read: () => {
      sent.push('version');
      return Promise.resolve(store.version);
    },
    readWithSituation: (c: ConversationRef) => {
      sent.push(`version+situation ${c.key}`);
      return Promise.resolve({ version: store.version, situation: busy });
    },
  };
  const agents = {
    stored: agentIn('ws-a'),
    getEntity: () => {
      sent.push('agent');
      return Promise.resolve(agents.stored);
    },
  };
  const versions = new CatalogVersions(store as unknown as CatalogVersionRepository, new MemorySignalBus());
  const catalog = new AdmissionCatalog(agents as unknown as AgentsService, versions, {} as unknown as ResourceCatalog);
  return { sent, store, agents, tenancy: new WorkspaceAdmission(catalog) };
}

describe('WorkspaceAdmission.derive: the situation read with the catalogue version', () => {
  it('the agent not cached yet: the version, then the agent, no situation (admission reads it)', async () => {
    const { sent, tenancy } = setup();
    const d = await tenancy.derive(message, null, performance.now());
    expect(d.situation).toBeNull();
    expect(d.submission.conversation?.workspace_id).toBe('ws-a');
    expect(sent).toEqual(['version', 'agent']);
  });

  it('the agent cached: one statement for the version and its conversation situation, keyed as admission keys it', async () => {
    const { sent, tenancy } = setup();
    await tenancy.derive(message, null, performance.now());
    sent.length = 0;
    const d = await tenancy.derive(message, null, performance.now());
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(/^version\+situation /);
    expect(sent[0]).toContain('ws-a');
    expect(d.situation?.key).toBe(sent[0].slice('version+situation '.length));
    expect(await d.situation?.situation).toEqual(busy);
  });

  it("the catalogue moved the agent to another workspace: the agent read again, the situation's key is the old one", async () => {
    const { sent, store, agents, tenancy } = setup();
    await tenancy.derive(message, null, performance.now());
    store.version = 2;
    agents.stored = agentIn('ws-b');
    sent.length = 0;
    const d = await tenancy.derive(message, null, performance.now());
    expect(sent).toEqual([expect.stringMatching(/^version\+situation .*ws-a/), 'agent']);
    expect(d.submission.conversation?.workspace_id).toBe('ws-b');
    // Admission compares it with its own conversation's key and reads the situation again.
    expect(d.situation?.key).toContain('ws-a');
  });

  it('an event without a conversation: the version alone', async () => {
    const { sent, tenancy } = setup();
    const solo = { ...message, conversation: undefined };
    await tenancy.derive(solo, null, performance.now());
    sent.length = 0;
    const d = await tenancy.derive(solo, null, performance.now());
    expect(d.situation).toBeNull();
    expect(sent).toEqual(['version']);
  });

  it('a conversation naming another workspace is refused as before, whatever was read', async () => {
    const { tenancy } = setup();
    await tenancy.derive(message, null, performance.now());
    const other = { ...message, conversation: { conversation_id: 'c1', workspace_id: 'ws-z' } };
    await expect(tenancy.derive(other, null, performance.now())).rejects.toThrow(
      /conversation.workspace_id: the run's workspace comes from the API key and the agent/,
    );
  });
});
