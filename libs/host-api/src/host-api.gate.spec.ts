import { TokenBucket, buildSnapshot, type AuditRecord, type AuditService } from '@libs/authz';
import { FencedError, type RunLease } from '@libs/persistence';
import type { RunGrant, RunGrants } from '@libs/runs';
import { DomainError } from '@libs/protocol';
import { HostApiGate, type CallNeeds, type Caller } from './host-api.gate';

const RUN = 'run-1';
const LEASE: RunLease = { run_id: RUN, attempt: 1, owner_process_id: 'p1' };

function setup(opts: { deadline?: number | null; burst?: number; behindCommit?: Promise<void> } = {}) {
  const snapshot = buildSnapshot({
    run_id: RUN,
    scope: {
      agent_id: 'a',
      runner_id: 'plugin:acme/bot/default',
      plugin_id: 'acme/bot',
      conversation_id: 'c1',
      thread_id: null,
      bot_id: null,
      workspace_id: null,
      actor_type: 'user',
      actor_id: 'u1',
      subject_type: null,
      subject_id: null,
    },
    manifest: { capabilities: {}, permissions: { history: ['page'], storage: ['plugin'] } },
    policy: { resource: {}, state: {} },
    catalog: { models: [], tools: [], knowledge_bases: [] },
    limits: {
      max_payload_bytes: 100,
      max_state_value_bytes: 100,
      max_storage_value_bytes: 100,
      calls_per_second: 1,
      burst: opts.burst ?? 10,
    },
    deadline_at_ms: opts.deadline === undefined ? null : opts.deadline,
  });
  const run: RunGrant = {
    run_id: RUN,
    plugin_id: 'acme/bot',
    runner_id: snapshot.scope.runner_id,
    workspace_id: null,
    snapshot,
    signal: new AbortController().signal,
    budget: new TokenBucket(snapshot.limits.calls_per_second, snapshot.limits.burst),
    started_at: Date.now(),
    active: true,
    cancel_requested: false,
    lease: LEASE,
  };
  const grants: RunGrants = {
    grant: (id) => (id === RUN ? run : undefined),
    find: (id) => Promise.resolve(id === RUN ? run : undefined),
  };
  const audit: (AuditRecord & { lease: RunLease | null })[] = [];
  /** Rows written behind the answer (recordAfterAnswer). */
  const behind: AuditRecord[] = [];
  const auditService = {
    record: (r: AuditRecord, lease: RunLease | null = null) => Promise.resolve(void audit.push({ ...r, lease })),
    recordAfterAnswer: (r: AuditRecord) => {
      behind.push(r);
      return opts.behindCommit ?? null;
    },
  } as unknown as AuditService;
  return { guard: new HostApiGate(grants, auditService), audit, behind };
}

const PLUGINS: Record<string, string> = { good: 'acme/bot', other: 'other/bot' };
/** A caller as an adapter resolves it: a known credential names its plugin, anything else is unauthenticated. */
const md =
  (token: string | null): Caller =>
  () =>
    PLUGINS[token ?? '']
      ? Promise.resolve(PLUGINS[token!])
      : Promise.reject(new DomainError('unauthenticated', token ? 'invalid plugin token' : 'missing plugin token'));

const needs = (extra: Partial<CallNeeds> = {}): CallNeeds => ({
  action: 'history.page',
  run_id: RUN,
  flag: 'history_page',
  payload_bytes: 10,
  ...extra,
});

describe('HostApiGate: the order of docs/protocol.md#the-gate, every call audited', () => {
  // Each row breaks one check and every check after it: the first broken one must decide.
  it.each([
    ['no token', null, needs({ run_id: 'nope', flag: 'history_search', payload_bytes: 1e6 }), 'unauthenticated'],
    ['unknown token', 'bad', needs({ run_id: 'nope' }), 'unauthenticated'],
    ['missing run_id', 'good', needs({ run_id: '', flag: 'history_search' }), 'invalid_argument'],
    ['run not active', 'good', needs({ run_id: 'nope', flag: 'history_search' }), 'not_found'],
    ["another plugin's run", 'other', needs({ flag: 'history_search', payload_bytes: 1e6 }), 'unauthorized'],
    ['API flag not granted', 'good', needs({ flag: 'history_search', payload_bytes: 1e6 }), 'unauthorized'],
    [
      'resource not granted',
      'good',
      needs({ flag: undefined, resource: { kind: 'model', id: 'm', operation: 'invoke' }, payload_bytes: 1e6 }),
      'unauthorized',
    ],
    [
      'storage area not granted',
      'good',
      needs({ flag: undefined, storage: 'workspace', payload_bytes: 1e6 }),
      'unauthorized',
    ],
    ['another conversation', 'good', needs({ conversation_id: 'c2', payload_bytes: 1e6 }), 'unauthorized'],
    ['payload too large', 'good', needs({ payload_bytes: 101 }), 'payload_too_large'],
  ])('%s → %s', async (_name, token, call, code) => {
    const { guard, audit } = setup();
    const handler = jest.fn(() => Promise.resolve('ok'));
    await expect(guard.call(md(token), call, handler)).rejects.toMatchObject({ code });
    expect(handler).not.toHaveBeenCalled();
    expect(audit).toEqual([expect.objectContaining({ action: call.action, outcome: 'denied', error_code: code })]);
  });

  it('rate limit after the size check, deadline last', async () => {
    const limited = setup({ burst: 1, deadline: Date.now() - 1 });
    await expect(limited.guard.call(md('good'), needs(), () => Promise.resolve(1))).rejects.toMatchObject({
      code: 'deadline_exceeded',
    });
    await expect(limited.guard.call(md('good'), needs(), () => Promise.resolve(1))).rejects.toMatchObject({
      code: 'rate_limited',
    });
  });

  it('an allowed call runs its handler and is audited allowed, with the run and runner', async () => {
    const { guard, audit } = setup();
    await expect(guard.call(md('good'), needs(), () => Promise.resolve('ok'))).resolves.toBe('ok');
    expect(audit).toEqual([
      expect.objectContaining({
        outcome: 'allowed',
        run_id: RUN,
        runner_id: 'plugin:acme/bot/default',
        plugin_id: 'acme/bot',
      }),
    ]);
  });

  it('a handler failure is audited failed; a handler refusal is audited denied', async () => {
    const { guard, audit } = setup();
    await expect(
      guard.call(md('good'), needs(), () => Promise.reject(new DomainError('not_found', 'no such event'))),
    ).rejects.toMatchObject({ code: 'not_found' });
    await expect(
      guard.call(md('good'), needs(), () => Promise.reject(new DomainError('unauthorized', 'other thread'))),
    ).rejects.toMatchObject({ code: 'unauthorized' });
    expect(audit.map((a) => [a.outcome, a.error_code])).toEqual([
      ['failed', 'not_found'],
      ['denied', 'unauthorized'],
    ]);
  });

  it("a write refused by the run's fence answers not_found (the run is not active) and is audited failed, unfenced", async () => {
    const { guard, audit } = setup();
    await expect(
      guard.call(md('good'), needs({ writes: true }), () => Promise.reject(new FencedError(LEASE))),
    ).rejects.toMatchObject({ code: 'not_found', message: `run ${RUN} is not active` });
    expect(audit).toEqual([expect.objectContaining({ outcome: 'failed', error_code: 'not_found', lease: null })]);
  });

  it("the allowed row of a write call is fenced by the run's lease; a read call's is not", async () => {
    const { guard, audit } = setup();
    await guard.call(md('good'), needs({ writes: true }), () => Promise.resolve(1));
    await guard.call(md('good'), needs(), () => Promise.resolve(1));
    expect(audit.map((a) => [a.outcome, a.lease])).toEqual([
      ['allowed', LEASE],
      ['allowed', null],
    ]);
  });

  describe('read calls: the audit row behind the answer (docs/durability.md#audit-rows-of-read-calls)', () => {
    it('an allowed read is answered without waiting for its row, which is queued before the answer', async () => {
      const { guard, audit, behind } = setup({ behindCommit: undefined });
      const answer = guard.call(md('good'), needs({ read: true }), () => Promise.resolve('ok'));
      await expect(answer).resolves.toBe('ok');
      expect(audit).toEqual([]);
      expect(behind).toEqual([expect.objectContaining({ action: 'history.page', outcome: 'allowed', run_id: RUN })]);
    });

    it('over the bound of uncommitted rows, the answer waits for its row', async () => {
      let commit!: () => void;
      const behindCommit = new Promise<void>((resolve) => (commit = resolve));
      const { guard, behind } = setup({ behindCommit });
      let answered = false;
      const answer = guard
        .call(md('good'), needs({ read: true }), () => Promise.resolve('ok'))
        .then((v) => {
          answered = true;
          return v;
        });
      await new Promise((r) => setImmediate(r));
      expect(behind).toHaveLength(1);
      expect(answered).toBe(false);
      commit();
      await expect(answer).resolves.toBe('ok');
    });

    it('a denied or failed read waits for its row, as every write does', async () => {
      const { guard, audit, behind } = setup();
      await expect(
        guard.call(md('good'), needs({ read: true, payload_bytes: 101 }), () => Promise.resolve(1)),
      ).rejects.toMatchObject({ code: 'payload_too_large' });
      await expect(
        guard.call(md('good'), needs({ read: true }), () =>
          Promise.reject(new DomainError('not_found', 'no such key')),
        ),
      ).rejects.toMatchObject({ code: 'not_found' });
      await expect(guard.call(md('good'), needs({ action: 'state.set' }), () => Promise.resolve(1))).resolves.toBe(1);
      expect(behind).toEqual([]);
      expect(audit.map((a) => [a.action, a.outcome])).toEqual([
        ['history.page', 'denied'],
        ['history.page', 'failed'],
        ['state.set', 'allowed'],
      ]);
    });
  });
});
