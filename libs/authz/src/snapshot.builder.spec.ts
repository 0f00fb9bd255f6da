import { createHash } from 'node:crypto';
import type { RunnerManifest } from '@libs/protocol';
import type { CatalogKnowledgeBase, CatalogModel, CatalogTool } from './resource-catalog';
import type { AuthorizationSnapshot, RunScope, StateScope } from './snapshot';
import {
  buildSnapshot,
  canonicalJson,
  snapshotHash,
  stateScopesOf,
  type PolicyInput,
  type SnapshotInput,
} from './snapshot.builder';

/*
 * Property-style check of the three-layer rule (manifest permissions and capabilities ∩ agent
 * policy ∩ run scope). The expected grants are written out below from the rule itself, without
 * calling any helper of the builder, and compared with buildSnapshot on a few thousand inputs
 * drawn from a seeded generator (same cases on every run).
 */

const SEED = 0x5eed_2026;
const CASES = 3000;

const MODEL_OPS = ['invoke', 'stream', 'rerank', 'count_tokens'] as const;
const TOOL_OPS = ['detail', 'call'] as const;
const KB_OPS = ['list', 'retrieve'] as const;
const HISTORY_OPS = ['page', 'search'] as const;
const EVENT_OPS = ['get', 'page'] as const;
const STORAGE_AREAS = ['plugin', 'workspace', 'binding'] as const;
const SCOPES = ['conversation', 'actor', 'subject', 'runner'] as const;

const CATALOG: SnapshotInput['catalog'] = {
  models: [
    { model_id: 'llm-small', model_type: 'llm', provider: 'acme' },
    { model_id: 'llm-large', model_type: 'llm', provider: 'other' },
    { model_id: 'rerank-1', model_type: 'rerank', provider: 'acme' },
  ],
  tools: [
    { tool_name: 'search_web', description: 'web', parameters: { type: 'object' }, source: 'builtin', source_id: null },
    { tool_name: 'send_mail', description: 'mail', parameters: null, source: 'mcp', source_id: 'mcp-1' },
    { tool_name: 'calc', description: 'math', parameters: { type: 'object' }, source: 'plugin', source_id: 'p-1' },
  ],
  knowledge_bases: [
    { kb_id: 'kb-docs', kb_name: 'Docs', kb_type: 'vector' },
    { kb_id: 'kb-faq', kb_name: 'FAQ', kb_type: 'keyword' },
  ],
};

const LIMITS: AuthorizationSnapshot['limits'] = {
  max_payload_bytes: 1_048_576,
  max_state_value_bytes: 262_144,
  max_storage_value_bytes: 1_048_576,
  calls_per_second: 20,
  burst: 40,
};

/** mulberry32: small, fast, deterministic. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

class Gen {
  constructor(readonly next: () => number) {}

  chance(p = 0.5): boolean {
    return this.next() < p;
  }

  pick<T>(values: readonly T[]): T {
    return values[Math.floor(this.next() * values.length)];
  }

  /** A random subset of `values`, in random order. */
  subset<T>(values: readonly T[]): T[] {
    const out = values.filter(() => this.chance());
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }

  /** undefined a quarter of the time (a field left out: its default applies). */
  maybe<T>(make: () => T): T | undefined {
    return this.chance(0.25) ? undefined : make();
  }

  bool(): boolean | undefined {
    return this.pick([undefined, true, false]);
  }
}

type Manifest = Pick<RunnerManifest, 'capabilities' | 'permissions'>;

interface Case {
  manifest: Manifest;
  policy: PolicyInput;
  scope: RunScope;
}

/** Case `i`: scope presence is enumerated (16 combinations, cycled), everything else sampled. */
function makeCase(g: Gen, i: number): Case {
  const withConversation = (i & 1) !== 0;
  const withActor = (i & 2) !== 0;
  const withSubject = (i & 4) !== 0;
  const withWorkspace = (i & 8) !== 0;
  const scope: RunScope = {
    agent_id: g.pick(['agent-1', 'agent-2']),
    runner_id: 'acme/echo/default',
    plugin_id: g.pick(['acme/echo', 'other/plugin']),
    conversation_id: withConversation ? g.pick(['conv-1', 'conv-2']) : null,
    thread_id: withConversation && g.chance() ? 'thread-1' : null,
    bot_id: withConversation && g.chance() ? 'bot-1' : null,
    workspace_id: withWorkspace ? g.pick(['ws-1', 'ws-2']) : null,
    actor_type: withActor ? g.pick(['user', 'bot']) : null,
    actor_id: withActor ? g.pick(['u1', 'u2']) : null,
    subject_type: withSubject ? 'document' : null,
    subject_id: withSubject ? g.pick(['doc-1', 'doc-2']) : null,
  };
  const manifest: Manifest = {
    capabilities: { tool_calling: g.bool(), knowledge_retrieval: g.bool(), streaming: g.bool(), steering: g.bool() },
    permissions: {
      models: g.maybe(() => g.subset(MODEL_OPS)),
      tools: g.maybe(() => g.subset(TOOL_OPS)),
      knowledge_bases: g.maybe(() => g.subset(KB_OPS)),
      history: g.maybe(() => g.subset(HISTORY_OPS)),
      events: g.maybe(() => g.subset(EVENT_OPS)),
      storage: g.maybe(() => g.subset(STORAGE_AREAS)),
    },
  };
  const policy: PolicyInput = {
    resource: {
      allowed_model_ids: g.maybe(() => g.subset([...CATALOG.models.map((m) => m.model_id), 'unknown-model'])),
      allowed_tool_names: g.maybe(() => g.subset([...CATALOG.tools.map((t) => t.tool_name), 'unknown-tool'])),
      allow_all_tools: g.bool(),
      allowed_kb_ids: g.maybe(() => g.subset([...CATALOG.knowledge_bases.map((k) => k.kb_id), 'unknown-kb'])),
      allow_plugin_storage: g.bool(),
      allow_workspace_storage: g.bool(),
      allow_binding_storage: g.bool(),
      history: g.maybe(() => g.subset(HISTORY_OPS)),
      events: g.maybe(() => g.subset(EVENT_OPS)),
      prompt: g.maybe(() => (g.chance() ? [] : [{ role: 'system', content: `be brief ${i}` }])),
    },
    state: { enable_state: g.bool(), state_scopes: g.maybe(() => g.subset(SCOPES)) },
  };
  // Drawn last, so the earlier draws of each case stay what they were.
  manifest.capabilities.interactions = g.bool();
  manifest.permissions.interactions = g.maybe(() => g.subset(['request'] as const));
  policy.delivery = g.maybe(() => ({ enable_interactions: g.bool() }));
  return { manifest, policy, scope };
}

function snapshotOf(c: Case, runId = 'run-1'): AuthorizationSnapshot {
  return buildSnapshot({
    run_id: runId,
    scope: c.scope,
    manifest: c.manifest,
    policy: c.policy,
    catalog: CATALOG,
    limits: LIMITS,
    deadline_at_ms: null,
  });
}

const sorted = <T>(values: T[], key: (v: T) => string = String): T[] =>
  [...values].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));

/** The grants of a case, straight from the rule. Lists are sorted (the rule says nothing of order). */
function expectedGrants(c: Case) {
  const { permissions: perms, capabilities: caps } = c.manifest;
  const { resource, state } = c.policy;
  const { scope } = c;
  const inManifest = (list: readonly string[] | undefined, op: string) => list !== undefined && list.includes(op);
  const hasConversation = scope.conversation_id !== null;

  const policyHistory: readonly string[] = resource.history ?? ['page', 'search'];
  const policyEvents: readonly string[] = resource.events ?? ['get', 'page'];

  const enabledScopes: readonly StateScope[] =
    state.enable_state === false ? [] : (state.state_scopes ?? ['conversation', 'actor']);
  const identity: Record<StateScope, boolean> = {
    conversation: scope.conversation_id !== null,
    actor: scope.actor_id !== null,
    subject: scope.subject_id !== null,
    runner: true,
  };
  const stateScopes = enabledScopes.filter((s) => identity[s]);

  const areaAllowed = {
    plugin: resource.allow_plugin_storage !== false,
    workspace: resource.allow_workspace_storage === true,
    binding: resource.allow_binding_storage === true,
  };
  const areaOwner = {
    // docs/tenancy.md#storage: a plugin's storage is per workspace (the default one keeps the plain id).
    plugin:
      scope.workspace_id === null || scope.workspace_id === 'default'
        ? scope.plugin_id
        : `w/${scope.workspace_id}/${scope.plugin_id}`,
    workspace: scope.workspace_id === null ? 'default' : scope.workspace_id,
    binding: scope.agent_id,
  };
  const storage: Record<string, string> = {};
  for (const area of STORAGE_AREAS) {
    if (inManifest(perms.storage, area) && areaAllowed[area]) {
      storage[area] = areaOwner[area];
    }
  }

  const llmOps = ['invoke', 'stream', 'count_tokens'].filter((op) => inManifest(perms.models, op));
  const models: Array<CatalogModel & { operations: string[] }> = [];
  for (const id of resource.allowed_model_ids ?? []) {
    const m = CATALOG.models.find((x) => x.model_id === id);
    if (!m) {
      continue;
    }
    const ops = m.model_type === 'rerank' ? (inManifest(perms.models, 'rerank') ? ['rerank'] : []) : llmOps;
    if (ops.length > 0) {
      models.push({ ...m, operations: sorted(ops) });
    }
  }

  const toolOps = ['detail', 'call'].filter((op) => inManifest(perms.tools, op));
  const toolNames =
    resource.allow_all_tools === true ? CATALOG.tools.map((t) => t.tool_name) : (resource.allowed_tool_names ?? []);
  const tools: Array<CatalogTool & { tool_type: string; operations: string[] }> = [];
  if (caps.tool_calling === true && toolOps.length > 0) {
    for (const name of toolNames) {
      const t = CATALOG.tools.find((x) => x.tool_name === name);
      if (t) {
        tools.push({ ...t, tool_type: t.source, operations: sorted(toolOps) });
      }
    }
  }

  const kbOps = ['list', 'retrieve'].filter((op) => inManifest(perms.knowledge_bases, op));
  const knowledgeBases: Array<CatalogKnowledgeBase & { operations: string[] }> = [];
  if (caps.knowledge_retrieval === true && kbOps.length > 0) {
    for (const id of resource.allowed_kb_ids ?? []) {
      const kb = CATALOG.knowledge_bases.find((x) => x.kb_id === id);
      if (kb) {
        knowledgeBases.push({ ...kb, operations: sorted(kbOps) });
      }
    }
  }

  const prompt = resource.prompt ?? [];
  return {
    available_apis: {
      prompt_get: prompt.length > 0,
      history_page: inManifest(perms.history, 'page') && policyHistory.includes('page') && hasConversation,
      history_search: inManifest(perms.history, 'search') && policyHistory.includes('search') && hasConversation,
      event_get: inManifest(perms.events, 'get') && policyEvents.includes('get'),
      event_page: inManifest(perms.events, 'page') && policyEvents.includes('page') && hasConversation,
      state: stateScopes.length > 0,
      storage: Object.keys(storage).length > 0,
      steering_pull: caps.steering === true && hasConversation,
      run_get: true,
    },
    interactions:
      caps.interactions === true &&
      inManifest(perms.interactions, 'request') &&
      c.policy.delivery?.enable_interactions === true
        ? ['request']
        : [],
    state_scopes: sorted(stateScopes),
    storage,
    prompt,
    models: sorted(models, (m) => m.model_id),
    tools: sorted(tools, (t) => t.tool_name),
    knowledge_bases: sorted(knowledgeBases, (k) => k.kb_id),
  };
}

/** The same view of an actual snapshot. */
function actualGrants(s: AuthorizationSnapshot) {
  return {
    available_apis: s.available_apis,
    interactions: s.interactions,
    state_scopes: sorted(s.state.scopes),
    storage: s.storage,
    prompt: s.prompt,
    models: sorted(
      s.resources.models.map((m) => ({ ...m, operations: sorted(m.operations) })),
      (m) => m.model_id,
    ),
    tools: sorted(
      s.resources.tools.map((t) => ({ ...t, operations: sorted(t.operations) })),
      (t) => t.tool_name,
    ),
    knowledge_bases: sorted(
      s.resources.knowledge_bases.map((k) => ({ ...k, operations: sorted(k.operations) })),
      (k) => k.kb_id,
    ),
  };
}

describe('buildSnapshot: the three-layer rule', () => {
  const g = new Gen(prng(SEED));
  const cases = Array.from({ length: CASES }, (_, i) => makeCase(g, i));

  it(`grants exactly what the rule allows on ${CASES} seeded cases`, () => {
    for (const [i, c] of cases.entries()) {
      const snapshot = snapshotOf(c);
      // The case travels with the comparison so a failure shows its inputs.
      expect({ case: i, input: c, grants: actualGrants(snapshot) }).toEqual({
        case: i,
        input: c,
        grants: expectedGrants(c),
      });
      expect(Object.keys(snapshot.state.scope_keys).sort()).toEqual(sorted(snapshot.state.scopes));
      for (const key of Object.values(snapshot.state.scope_keys)) {
        expect(key).toMatch(/^state:v1:[0-9a-f]{64}$/);
      }
      expect(snapshot).toMatchObject({ version: 1, run_id: 'run-1', scope: c.scope, limits: LIMITS });
    }
  });

  it('the sampled cases reach both outcomes of every flag and every grant kind', () => {
    const seen = new Map<string, Set<string>>();
    const note = (what: string, value: unknown) => {
      const set = seen.get(what) ?? new Set<string>();
      set.add(JSON.stringify(value));
      seen.set(what, set);
    };
    for (const c of cases) {
      const e = expectedGrants(c);
      for (const [flag, value] of Object.entries(e.available_apis)) {
        note(flag, value);
      }
      for (const area of STORAGE_AREAS) {
        note(`storage.${area}`, area in e.storage);
      }
      for (const scope of SCOPES) {
        note(`state.${scope}`, e.state_scopes.includes(scope));
      }
      note('interactions', e.interactions.length > 0);
      note('models', e.models.length > 0);
      note(
        'rerank',
        e.models.some((m) => m.model_type === 'rerank'),
      );
      note('tools', e.tools.length > 0);
      note('all tools', e.tools.length === CATALOG.tools.length);
      note('knowledge_bases', e.knowledge_bases.length > 0);
      note('workspace default owner', e.storage.workspace === 'default');
    }
    for (const [what, values] of seen) {
      const expected = what === 'run_get' ? 1 : 2;
      expect({ what, outcomes: values.size }).toEqual({ what, outcomes: expected });
    }
  });

  it('its state is stateScopesOf(policy, scope), and the same given those (admission computes them ahead)', () => {
    for (const c of cases.slice(0, 200)) {
      const own = snapshotOf(c);
      const ahead = stateScopesOf(c.policy.state, c.scope);
      expect(own.state).toEqual(ahead);
      expect(
        buildSnapshot({
          run_id: 'run-1',
          scope: c.scope,
          manifest: c.manifest,
          policy: c.policy,
          catalog: CATALOG,
          limits: LIMITS,
          deadline_at_ms: null,
          state: ahead,
        }),
      ).toEqual(own);
    }
  });

  it('does not depend on the run id (state follows the scope across runs)', () => {
    for (const c of cases.slice(0, 200)) {
      const a = snapshotOf(c, 'run-a');
      const b = snapshotOf(c, 'run-b');
      expect(b.state.scope_keys).toEqual(a.state.scope_keys);
      expect({ ...b, run_id: 'x' }).toEqual({ ...a, run_id: 'x' });
    }
  });
});

/** Every leaf of a JSON value, as [path, value]. */
function leaves(value: unknown, path: Array<string | number> = []): Array<[Array<string | number>, unknown]> {
  if (Array.isArray(value)) {
    return value.flatMap((v, i) => leaves(v, [...path, i]));
  }
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).flatMap(([k, v]) => leaves(v, [...path, k]));
  }
  return [[path, value]];
}

function withLeaf(root: unknown, path: Array<string | number>, leaf: unknown): unknown {
  const copy = structuredClone(root) as Record<string | number, unknown>;
  let node = copy;
  for (const key of path.slice(0, -1)) {
    node = node[key] as Record<string | number, unknown>;
  }
  node[path[path.length - 1]] = leaf;
  return copy;
}

function changed(value: unknown): unknown {
  if (typeof value === 'boolean') {
    return !value;
  }
  if (typeof value === 'number') {
    return value + 1;
  }
  if (typeof value === 'string') {
    return `${value}x`;
  }
  return 'was-null';
}

/** The same object with the keys of every object in reverse order. */
function reversedKeys(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(reversedKeys);
  }
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .reverse()
        .map(([k, v]) => [k, reversedKeys(v)]),
    );
  }
  return value;
}

describe('snapshotHash', () => {
  const rich: Case = {
    scope: {
      agent_id: 'agent-1',
      runner_id: 'acme/echo/default',
      plugin_id: 'acme/echo',
      conversation_id: 'conv-1',
      thread_id: 'thread-1',
      bot_id: 'bot-1',
      workspace_id: 'ws-1',
      actor_type: 'user',
      actor_id: 'u1',
      subject_type: 'document',
      subject_id: 'doc-1',
    },
    manifest: {
      capabilities: { tool_calling: true, knowledge_retrieval: true },
      permissions: {
        models: ['invoke', 'stream', 'rerank', 'count_tokens'],
        tools: ['detail', 'call'],
        knowledge_bases: ['list', 'retrieve'],
        history: ['page', 'search'],
        events: ['get', 'page'],
        storage: ['plugin', 'workspace', 'binding'],
      },
    },
    policy: {
      resource: {
        allowed_model_ids: ['llm-small', 'rerank-1'],
        allow_all_tools: true,
        allowed_kb_ids: ['kb-docs', 'kb-faq'],
        allow_plugin_storage: true,
        allow_workspace_storage: true,
        allow_binding_storage: true,
        prompt: [{ role: 'system', content: 'be brief' }],
      },
      state: { enable_state: true, state_scopes: ['conversation', 'actor', 'subject', 'runner'] },
    },
  };
  const base = buildSnapshot({
    run_id: 'run-1',
    scope: rich.scope,
    manifest: rich.manifest,
    policy: rich.policy,
    catalog: CATALOG,
    limits: LIMITS,
    deadline_at_ms: 1_764_600_000_000,
  });

  it('is a stable SHA-256 hex digest, independent of key order and of a JSON round trip', () => {
    const hash = snapshotHash(base);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(snapshotHash(base)).toBe(hash);
    expect(snapshotHash(reversedKeys(base) as AuthorizationSnapshot)).toBe(hash);
    expect(snapshotHash(JSON.parse(JSON.stringify(base)) as AuthorizationSnapshot)).toBe(hash);
    expect(JSON.stringify(reversedKeys(base))).not.toBe(JSON.stringify(base));
  });

  it('is the SHA-256 of the canonical JSON, as stored hashes were computed (one-shot hash, same digest)', () => {
    expect(snapshotHash(base)).toBe(createHash('sha256').update(canonicalJson(base)).digest('hex'));
    const material = canonicalJson({
      v: 1,
      scope: 'actor',
      agent_id: 'agent-1',
      runner_id: 'acme/echo/default',
      dims: { actor_type: 'user', actor_id: 'u1' },
    });
    expect(base.state.scope_keys.actor).toBe(`state:v1:${createHash('sha256').update(material).digest('hex')}`);
  });

  it('changes when any single grant, limit or scope field changes', () => {
    const hash = snapshotHash(base);
    const all = leaves(base);
    // The rich case grants something of every kind.
    expect(base.resources.models.length).toBeGreaterThan(0);
    expect(base.resources.tools.length).toBeGreaterThan(0);
    expect(base.resources.knowledge_bases.length).toBeGreaterThan(0);
    expect(Object.keys(base.storage)).toHaveLength(3);
    expect(base.state.scopes).toHaveLength(4);
    expect(all.length).toBeGreaterThan(60);

    for (const [path, value] of all) {
      const mutated = withLeaf(base, path, changed(value)) as AuthorizationSnapshot;
      expect({ path: path.join('.'), differs: snapshotHash(mutated) !== hash }).toEqual({
        path: path.join('.'),
        differs: true,
      });
    }
  });

  it('changes when a grant is added or removed', () => {
    const hash = snapshotHash(base);
    const variants: Array<[string, AuthorizationSnapshot]> = [
      ['one operation fewer', withLeaf(base, ['resources', 'models', 0, 'operations'], ['invoke', 'stream']) as never],
      ['one tool fewer', { ...base, resources: { ...base.resources, tools: base.resources.tools.slice(1) } }],
      ['no storage area', { ...base, storage: {} }],
      ['a storage area fewer', { ...base, storage: { plugin: 'acme/echo', workspace: 'ws-1' } }],
      ['a state scope fewer', { ...base, state: { ...base.state, scopes: ['conversation', 'actor', 'subject'] } }],
      ['no prompt', { ...base, prompt: [] }],
    ];
    for (const [label, variant] of variants) {
      expect({ label, differs: snapshotHash(variant) !== hash }).toEqual({ label, differs: true });
    }
  });

  it('differs between snapshots whose grants differ, over the sampled cases', () => {
    const g = new Gen(prng(SEED + 1));
    const byGrants = new Map<string, string>();
    for (let i = 0; i < 600; i++) {
      const c = makeCase(g, i);
      // Same scope and run for all: only the grants vary.
      const s = buildSnapshot({
        run_id: 'run-1',
        scope: rich.scope,
        manifest: c.manifest,
        policy: c.policy,
        catalog: CATALOG,
        limits: LIMITS,
        deadline_at_ms: null,
      });
      const grants = JSON.stringify(actualGrants(s)) + JSON.stringify(s.resources) + JSON.stringify(s.state);
      const hash = snapshotHash(s);
      const known = byGrants.get(hash);
      expect(known === undefined || known === grants).toBe(true);
      byGrants.set(hash, grants);
    }
    expect(byGrants.size).toBeGreaterThan(100);
  });
});

describe('state scope keys', () => {
  const policy: PolicyInput = {
    resource: {},
    state: { enable_state: true, state_scopes: ['conversation', 'actor', 'subject', 'runner'] },
  };
  const scope: RunScope = {
    agent_id: 'agent-1',
    runner_id: 'acme/echo/default',
    plugin_id: 'acme/echo',
    conversation_id: 'conv-1',
    thread_id: null,
    bot_id: null,
    workspace_id: null,
    actor_type: 'user',
    actor_id: 'u1',
    subject_type: 'document',
    subject_id: 'doc-1',
  };
  const keysOf = (overrides: Partial<RunScope>, runId = 'run-1') =>
    buildSnapshot({
      run_id: runId,
      scope: { ...scope, ...overrides },
      manifest: { capabilities: {}, permissions: {} },
      policy,
      catalog: CATALOG,
      limits: LIMITS,
      deadline_at_ms: null,
    }).state.scope_keys;
  const base = keysOf({});

  /** The scopes whose key differs from the base run's. */
  const differing = (overrides: Partial<RunScope>) => SCOPES.filter((s) => keysOf(overrides)[s] !== base[s]).sort();

  it('gives each scope of a run its own key, the same on every run with the same scope', () => {
    expect(Object.keys(base).sort()).toEqual([...SCOPES].sort());
    expect(new Set(Object.values(base)).size).toBe(4);
    expect(keysOf({}, 'run-2')).toEqual(base);
    expect(keysOf({ plugin_id: 'acme/other-plugin-session' })).toEqual(base);
  });

  it('differs per agent and per runner in every scope', () => {
    expect(differing({ agent_id: 'agent-2' })).toEqual([...SCOPES].sort());
    expect(differing({ runner_id: 'acme/echo/other' })).toEqual([...SCOPES].sort());
  });

  it('differs per conversation and per thread in the conversation scope only', () => {
    expect(differing({ conversation_id: 'conv-2' })).toEqual(['conversation']);
    expect(differing({ thread_id: 'thread-1' })).toEqual(['conversation']);
    expect(keysOf({ thread_id: 'thread-1' }).conversation).not.toBe(keysOf({ thread_id: 'thread-2' }).conversation);
  });

  it('differs per actor in the actor scope only, and per subject in the subject scope only', () => {
    expect(differing({ actor_id: 'u2' })).toEqual(['actor']);
    expect(differing({ actor_type: 'bot' })).toEqual(['actor']);
    expect(differing({ subject_id: 'doc-2' })).toEqual(['subject']);
  });

  it('has no key for a scope without an identity', () => {
    expect(Object.keys(keysOf({ conversation_id: null, actor_id: null, subject_id: null }))).toEqual(['runner']);
  });
});

describe('buildSnapshot: workspaces (docs/tenancy.md#resources)', () => {
  const scope = (workspace_id: string | null): Case['scope'] => ({
    agent_id: 'agent-1',
    runner_id: 'acme/echo/default',
    plugin_id: 'acme/echo',
    conversation_id: null,
    thread_id: null,
    bot_id: null,
    workspace_id,
    actor_type: null,
    actor_id: null,
    subject_type: null,
    subject_id: null,
  });
  const catalog: SnapshotInput['catalog'] = {
    models: [
      { model_id: 'm-own', model_type: 'llm', provider: 'acme', workspace_id: 'ws-1', shared: false },
      { model_id: 'm-other', model_type: 'llm', provider: 'acme', workspace_id: 'ws-2', shared: false },
      { model_id: 'm-shared', model_type: 'llm', provider: 'acme', workspace_id: 'ws-2', shared: true },
    ],
    tools: [
      { tool_name: 'builtin', description: '', parameters: null, source: 'builtin', source_id: null },
      { tool_name: 't-other', description: '', parameters: null, source: 'mcp', source_id: 's', workspace_id: 'ws-2' },
    ],
    knowledge_bases: [
      { kb_id: 'kb-own', kb_name: 'own', kb_type: 'fts', workspace_id: 'ws-1', shared: false },
      { kb_id: 'kb-other', kb_name: 'other', kb_type: 'fts', workspace_id: 'ws-2', shared: false },
    ],
  };
  const grant = (workspace: string | null) =>
    buildSnapshot({
      run_id: 'run-1',
      scope: scope(workspace),
      manifest: {
        capabilities: { tool_calling: true, knowledge_retrieval: true },
        permissions: { models: ['invoke'], tools: ['call'], knowledge_bases: ['retrieve'], storage: ['plugin'] },
      },
      policy: {
        resource: {
          allowed_model_ids: ['m-own', 'm-other', 'm-shared'],
          allow_all_tools: true,
          allowed_kb_ids: ['kb-own', 'kb-other'],
        },
        state: {},
      },
      catalog,
      limits: LIMITS,
      deadline_at_ms: null,
    });

  it("grants a run only its workspace's resources, shared ones and the host's own, never another workspace's", () => {
    const s = grant('ws-1');
    expect(s.scope.workspace_id).toBe('ws-1');
    expect(s.resources.models.map((m) => m.model_id)).toEqual(['m-own', 'm-shared']);
    expect(s.resources.tools.map((t) => t.tool_name)).toEqual(['builtin']);
    expect(s.resources.knowledge_bases.map((k) => k.kb_id)).toEqual(['kb-own']);
    // The grant names the resource, not its owner.
    expect(s.resources.models[0]).not.toHaveProperty('workspace_id');
    expect(grant('ws-2').resources.knowledge_bases.map((k) => k.kb_id)).toEqual(['kb-other']);
  });

  it("keeps a plugin's storage apart per workspace", () => {
    expect(grant('ws-1').storage.plugin).toBe('w/ws-1/acme/echo');
    expect(grant('ws-2').storage.plugin).toBe('w/ws-2/acme/echo');
    expect(grant('default').storage.plugin).toBe('acme/echo');
  });
});

describe('canonicalJson', () => {
  /** The first implementation (entries, filter, sort, join): the text must not change, stored hashes verify by it. */
  const reference = (value: unknown): string => {
    if (Array.isArray(value)) {
      return `[${value.map(reference).join(',')}]`;
    }
    if (value && typeof value === 'object') {
      const entries = Object.entries(value as Record<string, unknown>)
        .filter(([, v]) => v !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${reference(v)}`).join(',')}}`;
    }
    return JSON.stringify(value ?? null);
  };

  it('sorts keys by code unit, leaves out undefined values, writes undefined array items as null', () => {
    expect(canonicalJson({ b: 1, a: [undefined, { d: null, c: 'x' }], e: undefined })).toBe(
      '{"a":[null,{"c":"x","d":null}],"b":1}',
    );
    expect(canonicalJson({ é: 1, Z: 2, a: 3, '"q"': 4, 10: 5, 9: 6 })).toBe(
      '{"\\"q\\"":4,"10":5,"9":6,"Z":2,"a":3,"é":1}',
    );
    expect(canonicalJson({ u: undefined })).toBe('{}');
    expect(canonicalJson([])).toBe('[]');
  });

  it('gives the same text when keys are quoted from memory, past its bounds and for long keys', () => {
    const many = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i} "q"`, i]));
    const long = { ['x'.repeat(65)]: { ['y'.repeat(64)]: 1, 'é\n': 2 } };
    for (let round = 0; round < 2; round++) {
      expect(canonicalJson(many)).toBe(reference(many));
      expect(canonicalJson(long)).toBe(reference(long));
    }
  });

  it('gives the same text as the first implementation', () => {
    const values: unknown[] = [
      null,
      undefined,
      0,
      false,
      '',
      'text "quoted" \n',
      [1, [2, [3, {}]], 'x'],
      { version: 1, scope: { run_id: 'r', b: null, a: undefined }, list: [{ z: 1, y: [true, false] }], '': 'empty' },
      { 'a-b': 1, a_b: 2, 'a.b': 3, A: 4, '\u2028': 5, '😀': 6, '\uffff': 7 },
    ];
    for (const v of values) {
      expect(canonicalJson(v)).toBe(reference(v));
    }
  });
});
