import { Injectable } from '@nestjs/common';
import { StoresRepository, type RunLease } from '@libs/persistence';
import { DomainError, STATE_SCOPES, checkJson } from '@libs/protocol';

export const STATE_VALUE_LIMIT = 256 * 1024;
export const STATE_LIST_LIMIT = 100;
const KEY_ALIASES: Record<string, string> = { conversation_id: 'external.conversation_id' };

export type ScopeKeys = Partial<Record<(typeof STATE_SCOPES)[number], string>>;

/**
 * Host-owned small JSON state (docs/conversations-and-steering.md#transcript-event-log-and-state),
 * addressed through a run's frozen scope keys.
 */
@Injectable()
export class StateService {
  constructor(private readonly stores: StoresRepository) {}

  /** The isolation key of `scope` for this run; errors when the scope is not enabled or has no identity. */
  scopeKey(keys: ScopeKeys, scope: string): string {
    if (!(STATE_SCOPES as readonly string[]).includes(scope)) {
      throw new DomainError('invalid_argument', `scope: must be one of ${STATE_SCOPES.join(', ')}`, { field: 'scope' });
    }
    const key = keys[scope as keyof ScopeKeys];
    if (!key) {
      throw new DomainError(
        'unauthorized',
        `scope "${scope}" is not enabled for this run (agent state policy or no identity)`,
        {
          field: 'scope',
        },
      );
    }
    return key;
  }

  normaliseKey(key: string): string {
    if (typeof key !== 'string' || key.length === 0 || key.length > 255) {
      throw new DomainError('invalid_argument', 'key: must be 1-255 characters', { field: 'key' });
    }
    return KEY_ALIASES[key] ?? key;
  }

  /** JSON text of a value, within the 256 KiB limit. */
  encode(value: unknown): string {
    if (value === undefined) {
      throw new DomainError('invalid_argument', 'value: is required (use state_delete to remove a key)', {
        field: 'value',
      });
    }
    // Values reach later runs' contexts (protobuf): the same depth and string rules as any JSON entering the host.
    const problem = checkJson(value, 'value');
    if (problem) {
      throw new DomainError('invalid_argument', `${problem.field}: ${problem.rule}`, { field: problem.field });
    }
    let text: string;
    try {
      text = JSON.stringify(value);
    } catch {
      throw new DomainError('invalid_argument', 'value: must be JSON-serialisable', { field: 'value' });
    }
    const size = Buffer.byteLength(text);
    if (size > STATE_VALUE_LIMIT) {
      throw new DomainError(
        'payload_too_large',
        `value: ${size} bytes exceeds the limit of ${STATE_VALUE_LIMIT} bytes`,
        {
          field: 'value',
          limit: STATE_VALUE_LIMIT,
        },
      );
    }
    return text;
  }

  async get(keys: ScopeKeys, scope: string, key: string): Promise<unknown> {
    const text = await this.stores.stateGet(this.scopeKey(keys, scope), this.normaliseKey(key));
    return text === null ? null : (JSON.parse(text) as unknown);
  }

  /** A run's write: fenced by its lease when given (FencedError, nothing written: docs/scale-out.md#fenced-host-api-writes). */
  async set(keys: ScopeKeys, scope: string, key: string, value: unknown, lease: RunLease | null = null): Promise<void> {
    const scopeKey = this.scopeKey(keys, scope);
    const k = this.normaliseKey(key);
    await this.stores.stateSet(scopeKey, k, this.encode(value), lease);
  }

  async delete(keys: ScopeKeys, scope: string, key: string, lease: RunLease | null = null): Promise<boolean> {
    return this.stores.stateDelete(this.scopeKey(keys, scope), this.normaliseKey(key), lease);
  }

  async list(keys: ScopeKeys, scope: string, prefix: string | undefined, limit: number | undefined) {
    const n = limit === undefined || limit <= 0 ? STATE_LIST_LIMIT : Math.min(limit, STATE_LIST_LIMIT);
    const found = await this.stores.stateKeys(this.scopeKey(keys, scope), prefix ?? '', n + 1);
    return { keys: found.slice(0, n), has_more: found.length > n };
  }

  /** Current values of the enabled scopes, for the run context (at most 100 keys per scope). */
  async snapshot(keys: ScopeKeys, conversationId: string | null): Promise<Record<string, Record<string, unknown>>> {
    const entries = new Map<string, readonly { state_key: string; value: string }[]>();
    for (const scopeKey of Object.values(keys)) {
      entries.set(scopeKey, await this.stores.stateEntries(scopeKey, STATE_LIST_LIMIT));
    }
    return stateSnapshotOf(keys, conversationId, entries);
  }
}

/**
 * The run context's state (StateService.snapshot) from the entries of its scope keys as read (at
 * most STATE_LIST_LIMIT per key, by state key) — read by the snapshot, or by admission's one read
 * (AdmissionReadsRepository). A key with no entries read has none.
 */
export function stateSnapshotOf(
  keys: ScopeKeys,
  conversationId: string | null,
  entries: ReadonlyMap<string, readonly { state_key: string; value: string }[]>,
): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = { conversation: {}, actor: {}, subject: {}, runner: {} };
  for (const [scope, scopeKey] of Object.entries(keys)) {
    for (const row of entries.get(scopeKey) ?? []) {
      out[scope][row.state_key] = JSON.parse(row.value) as unknown;
    }
  }
  if (keys.conversation && conversationId && !('external.conversation_id' in out.conversation)) {
    out.conversation['external.conversation_id'] = conversationId;
  }
  return out;
}
