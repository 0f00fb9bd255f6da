import { hash } from 'node:crypto';
import type { RunnerManifest } from '@libs/protocol';
import type { CatalogKnowledgeBase, CatalogModel, CatalogTool } from './resource-catalog';
import { visibleIn, workspaceOwners } from './tenancy';
import type { ApiFlags, AuthorizationSnapshot, RunScope, StateScope, StorageArea } from './snapshot';

/** The agent policy fields the snapshot reads (validated and defaulted on agent write). */
export interface PolicyInput {
  resource: {
    allowed_model_ids?: string[];
    allowed_tool_names?: string[];
    allow_all_tools?: boolean;
    allowed_kb_ids?: string[];
    allow_plugin_storage?: boolean;
    allow_workspace_storage?: boolean;
    allow_binding_storage?: boolean;
    history?: string[];
    events?: string[];
    prompt?: { role: string; content: string }[];
  };
  state: { enable_state?: boolean; state_scopes?: StateScope[] };
  delivery?: { enable_interactions?: boolean };
}

export interface SnapshotInput {
  run_id: string;
  scope: RunScope;
  manifest: Pick<RunnerManifest, 'capabilities' | 'permissions'>;
  policy: PolicyInput;
  catalog: { models: CatalogModel[]; tools: CatalogTool[]; knowledge_bases: CatalogKnowledgeBase[] };
  limits: AuthorizationSnapshot['limits'];
  deadline_at_ms: number | null;
  /**
   * The run's state scopes as `stateScopesOf(policy.state, scope)` gave them, when the caller
   * already has them (admission's reads ahead); computed here otherwise.
   */
  state?: StateScopes;
}

const both = <T extends string>(a: readonly string[] | undefined, b: readonly T[]): T[] =>
  b.filter((x) => (a ?? []).includes(x));

/** A catalogue entry without its tenancy fields (the grant names the resource, not its owner). */
function ownFields<T extends { workspace_id?: string; shared?: boolean }>(
  entry: T,
): Omit<T, 'workspace_id' | 'shared'> {
  const { workspace_id: _w, shared: _s, ...rest } = entry;
  return rest;
}

/** Scope identities: a scope without one is not available in this run. */
function scopeDims(scope: RunScope): Record<StateScope, Record<string, string | null> | null> {
  return {
    conversation: scope.conversation_id
      ? {
          conversation_id: scope.conversation_id,
          thread_id: scope.thread_id,
          bot_id: scope.bot_id,
          workspace_id: scope.workspace_id,
        }
      : null,
    actor: scope.actor_id ? { actor_type: scope.actor_type ?? 'user', actor_id: scope.actor_id } : null,
    subject: scope.subject_id ? { subject_type: scope.subject_type ?? 'unknown', subject_id: scope.subject_id } : null,
    runner: {},
  };
}

/** State is isolated per scope identity × agent × runner. */
export function stateScopeKey(scope: StateScope, run: RunScope, dims: Record<string, string | null>): string {
  const material = canonicalJson({ v: 1, scope, agent_id: run.agent_id, runner_id: run.runner_id, dims });
  return `state:v1:${hash('sha256', material, 'hex')}`;
}

/**
 * The run's state scopes and their keys: the agent's state policy ∩ the scopes the run has an
 * identity in. The snapshot's `state`; admission reads the scopes' entries with these keys, also
 * before the snapshot is built (docs/benchmarks.md, round 14 wt-pgc1r14).
 */
export interface StateScopes {
  scopes: StateScope[];
  scope_keys: Partial<Record<StateScope, string>>;
}

export function stateScopesOf(policy: PolicyInput['state'], scope: RunScope): StateScopes {
  const dims = scopeDims(scope);
  const stateScopes = policy.enable_state === false ? [] : (policy.state_scopes ?? ['conversation', 'actor']);
  const scopes = stateScopes.filter((s) => dims[s] !== null);
  const scope_keys: Partial<Record<StateScope, string>> = {};
  for (const s of scopes) {
    scope_keys[s] = stateScopeKey(s, scope, dims[s]!);
  }
  return { scopes, scope_keys };
}

/**
 * Grants = manifest permissions and capabilities ∩ agent policy ∩ run scope
 * (docs/protocol.md#the-authorization-snapshot).
 */
export function buildSnapshot(input: SnapshotInput): AuthorizationSnapshot {
  const { manifest, policy, scope } = input;
  // docs/tenancy.md#resources: only the run's workspace's resources and shared ones exist for it.
  const ws = scope.workspace_id;
  const catalog = {
    models: input.catalog.models.filter((m) => visibleIn(m, ws)),
    tools: input.catalog.tools.filter((t) => visibleIn(t, ws)),
    knowledge_bases: input.catalog.knowledge_bases.filter((k) => visibleIn(k, ws)),
  };
  const perms = manifest.permissions;
  const caps = manifest.capabilities;
  const hasConversation = scope.conversation_id !== null;

  const llmOps = both(perms.models, ['invoke', 'stream', 'count_tokens'] as const);
  const canRerank = (perms.models ?? []).includes('rerank');
  const models = (policy.resource.allowed_model_ids ?? []).flatMap((id) => {
    const m = catalog.models.find((x) => x.model_id === id);
    const operations = m?.model_type === 'rerank' ? (canRerank ? ['rerank'] : []) : llmOps;
    return m && operations.length > 0
      ? [{ model_id: m.model_id, model_type: m.model_type, provider: m.provider, operations }]
      : [];
  });

  const toolOps = both(perms.tools, ['detail', 'call'] as const);
  const toolNames = policy.resource.allow_all_tools
    ? catalog.tools.map((t) => t.tool_name)
    : (policy.resource.allowed_tool_names ?? []);
  const tools =
    caps.tool_calling && toolOps.length > 0
      ? toolNames.flatMap((name) => {
          const t = catalog.tools.find((x) => x.tool_name === name);
          return t ? [{ ...ownFields(t), tool_type: t.source, operations: [...toolOps] }] : [];
        })
      : [];

  const kbOps = both(perms.knowledge_bases, ['list', 'retrieve'] as const);
  const knowledge_bases =
    caps.knowledge_retrieval && kbOps.length > 0
      ? (policy.resource.allowed_kb_ids ?? []).flatMap((id) => {
          const kb = catalog.knowledge_bases.find((x) => x.kb_id === id);
          return kb ? [{ ...ownFields(kb), operations: [...kbOps] }] : [];
        })
      : [];

  const history = both(perms.history, (policy.resource.history ?? ['page', 'search']) as ('page' | 'search')[]);
  const events = both(perms.events, (policy.resource.events ?? ['get', 'page']) as ('get' | 'page')[]);

  const { scopes, scope_keys } = input.state ?? stateScopesOf(policy.state, scope);

  const owners = workspaceOwners(scope.workspace_id, scope.plugin_id, scope.agent_id);
  const allowed: Record<StorageArea, boolean> = {
    plugin: policy.resource.allow_plugin_storage ?? true,
    workspace: policy.resource.allow_workspace_storage ?? false,
    binding: policy.resource.allow_binding_storage ?? false,
  };
  const storage: Partial<Record<StorageArea, string>> = {};
  for (const area of both(perms.storage, ['plugin', 'workspace', 'binding'] as const)) {
    if (allowed[area]) {
      storage[area] = owners[area];
    }
  }

  const prompt = policy.resource.prompt ?? [];
  const available_apis: ApiFlags = {
    prompt_get: prompt.length > 0,
    history_page: history.includes('page') && hasConversation,
    history_search: history.includes('search') && hasConversation,
    event_get: events.includes('get'),
    event_page: events.includes('page') && hasConversation,
    state: scopes.length > 0,
    storage: Object.keys(storage).length > 0,
    // docs/protocol.md#the-authorization-snapshot: the runner declares steering and the run has a
    // conversation to steer.
    steering_pull: input.manifest.capabilities?.steering === true && hasConversation,
    run_get: true,
  };
  // docs/interactions.md: capability, permission and the agent's delivery policy, all three.
  const interactions: 'request'[] =
    caps.interactions === true &&
    (perms.interactions ?? []).includes('request') &&
    policy.delivery?.enable_interactions === true
      ? ['request']
      : [];

  return {
    version: 1,
    run_id: input.run_id,
    scope,
    resources: { models, tools, knowledge_bases },
    available_apis,
    state: { scopes, scope_keys },
    storage,
    prompt,
    interactions,
    limits: input.limits,
    deadline_at_ms: input.deadline_at_ms,
  };
}

/**
 * JSON with object keys sorted (by UTF-16 code units, as `<` compares), keys whose value is
 * undefined left out, so equal snapshots hash equally. Built by appending to one string (it runs
 * for every run's snapshot): no entry arrays, closures or joins per object.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) {
    let text = '[';
    for (let i = 0; i < value.length; i++) {
      text += i === 0 ? canonicalJson(value[i]) : `,${canonicalJson(value[i])}`;
    }
    return `${text}]`;
  }
  if (value && typeof value === 'object') {
    const object = value as Record<string, unknown>;
    let text = '{';
    for (const key of Object.keys(object).sort()) {
      const v = object[key];
      if (v !== undefined) {
        text += `${text.length === 1 ? '' : ','}${quotedKey(key)}:${canonicalJson(v)}`;
      }
    }
    return `${text}}`;
  }
  return JSON.stringify(value ?? null);
}

/**
 * Object keys as JSON strings, remembered: a snapshot's keys are the same few dozen run after run
 * (docs/benchmarks.md#snapshot-hashing-and-fastify-5128). Bounded in count and key length (tool
 * results pass through canonicalJson too); a key not remembered is quoted each time.
 */
const quotedKeys = new Map<string, string>();
const MAX_QUOTED_KEYS = 4096;
const MAX_QUOTED_KEY_LENGTH = 64;

function quotedKey(key: string): string {
  let quoted = quotedKeys.get(key);
  if (quoted === undefined) {
    quoted = JSON.stringify(key);
    if (key.length <= MAX_QUOTED_KEY_LENGTH && quotedKeys.size < MAX_QUOTED_KEYS) {
      quotedKeys.set(key, quoted);
    }
  }
  return quoted;
}

/** The hash of a snapshot, as built or as stored (its JSON): the same content gives the same hash. */
export function snapshotHash(snapshot: AuthorizationSnapshot | Readonly<Record<string, unknown>>): string {
  return hash('sha256', canonicalJson(snapshot), 'hex');
}
