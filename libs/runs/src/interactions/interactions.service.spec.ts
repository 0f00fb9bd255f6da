import type { DeliveryService, OutboxStore } from '@libs/delivery';
import type { InteractionsRepository } from '@libs/interactions';
import {
  FencedError,
  type AgentsRepository,
  type InteractionEntity,
  type InteractionFence,
  type JsonObject,
  type RunLease,
  type RunsRepository,
} from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import type { ElicitationParams } from '@libs/resources';
import type { AdmissionService } from '../admission.service';
import type { ActiveRun } from '../active-run';
import type { ActiveRuns } from '../active-runs';
import type { EventSubmission } from '../event-submission';
import type { ResultView } from '../run-stream.bus';
import { InteractionsService } from './interactions.service';

/**
 * The interaction rules of InteractionsService (docs/interactions.md, docs/scale-out.md#fenced-writes)
 * against a fake of its repository that keeps the rows in memory and fences as the units do (a
 * lease named in `lost` matches nothing: FencedError, nothing written), as the admission and
 * lifecycle specs fake theirs; the units themselves on both databases:
 * test/integration/interactions-fence.int-spec.ts.
 */

const lease = (runId: string): RunLease => ({ run_id: runId, attempt: 1, owner_process_id: 'p1' });

const request = (id: string) => ({
  interaction_id: id,
  title: 'Pick',
  fields: [{ id: 'c', label: 'Colour', type: 'select', options: [{ value: 'r', label: 'Red' }] }],
  actions: [{ id: 'ok', label: 'OK', style: 'primary' }],
  fallback_text: 'Reply with a colour',
});

function setup() {
  const rows = new Map<string, InteractionEntity>();
  /** Run ids whose lease this process lost: every fenced write of them is refused. */
  const lost = new Set<string>();
  const calls: string[] = [];
  const fenceOf = (f: InteractionFence | null) => (f ? `${f.kind}:${f.lease?.run_id}` : 'unfenced');
  const check = (f: InteractionFence | null) => {
    if (f?.lease && lost.has(f.lease.run_id)) {
      throw new FencedError(f.lease);
    }
  };
  /** As the real repository: a refused write is a rejected promise, never a throw. */
  const later = <T>(fn: () => T): Promise<T> => Promise.resolve().then(fn);
  const settle = (id: string, to: Partial<InteractionEntity>): boolean => {
    const row = rows.get(id);
    if (!row || row.status !== 'pending') {
      return false;
    }
    rows.set(id, { ...row, ...to });
    return true;
  };
  const repo = {
    insert: (row: InteractionEntity, f: InteractionFence | null) => {
      calls.push(`insert ${row.interaction_id} ${fenceOf(f)}`);
      return later(() => {
        check(f);
        rows.set(row.id, { ...row });
      });
    },
    get: (id: string) => Promise.resolve(rows.get(id) ?? null),
    byTokenHash: (hash: string) =>
      Promise.resolve([...rows.values()].find((r) => r.callback_token_hash === hash) ?? null),
    claim: (id: string, submission: JsonObject, eventId: string, now: number) => {
      calls.push(`claim ${rows.get(id)?.interaction_id} unfenced`);
      return Promise.resolve(
        settle(id, { status: 'submitted', submission, submission_event_id: eventId, submitted_at: now }),
      );
    },
    claimFenced: (id: string, submission: JsonObject, eventId: string, now: number, f: InteractionFence) => {
      calls.push(`claim ${rows.get(id)?.interaction_id} ${fenceOf(f)}`);
      return later(() => {
        check(f);
        return settle(id, { status: 'submitted', submission, submission_event_id: eventId, submitted_at: now });
      });
    },
    close: (id: string, status: InteractionEntity['status'], reason: string) =>
      Promise.resolve(settle(id, { status, status_reason: reason })),
    closeFenced: (
      id: string,
      status: InteractionEntity['status'],
      reason: string,
      _now: number,
      f: InteractionFence,
    ) => {
      calls.push(`close ${rows.get(id)?.interaction_id} ${status} ${fenceOf(f)}`);
      return later(() => {
        check(f);
        return settle(id, { status, status_reason: reason });
      });
    },
    pendingOfConversation: (agentId: string, conversationId: string, threadId: string | null, runId: string) =>
      Promise.resolve(
        [...rows.values()].filter(
          (r) =>
            r.status === 'pending' &&
            r.agent_id === agentId &&
            r.conversation_id === conversationId &&
            r.thread_id === threadId &&
            r.run_id !== runId,
        ),
      ),
    dueForExpiry: () => Promise.resolve([]),
  } as unknown as InteractionsRepository;

  /** What the runs' deliveries were asked to send (the request payloads carry the clear token). */
  const sent: { op: string; payload: Record<string, unknown> }[] = [];
  const live = new Map<string, ActiveRun>();
  const run = (runId: string, conversation = 'conv-1', interactions: string[] = ['request']): ActiveRun => {
    const r = {
      run_id: runId,
      agent_id: 'agent-1',
      runner_id: 'acme/echo/echo',
      lease: lease(runId),
      ended: false,
      finished: Promise.resolve(),
      snapshot: { interactions, scope: { conversation_id: conversation, thread_id: null, actor_id: 'u1' } },
      delivery: {
        plan: { surface: 'api', reply_target: null },
        emit: (op: string, payload: Record<string, unknown>) => {
          sent.push({ op, payload });
          return [];
        },
      },
    } as unknown as ActiveRun;
    live.set(runId, r);
    return r;
  };
  const admitted: EventSubmission[] = [];
  const outboxWrites: unknown[] = [];
  const service = new InteractionsService(
    repo,
    { get: (id: string) => live.get(id) } as unknown as ActiveRuns,
    { enqueue: () => undefined },
    {
      rows: (_a: string, _p: unknown, ops: unknown[]) => ops,
      published: () => undefined,
    } as unknown as DeliveryService,
    {
      write: (w: unknown) => {
        outboxWrites.push(w);
        return Promise.resolve();
      },
      hot: { read: () => Promise.resolve([]) },
    } as unknown as OutboxStore,
    { get: () => Promise.resolve(null) } as unknown as RunsRepository,
    { get: () => Promise.resolve(null) } as unknown as AgentsRepository,
    {
      submit: (sub: EventSubmission) => {
        admitted.push(sub);
        return Promise.resolve({ disposition: 'started', run_id: 'run-next' });
      },
    } as unknown as AdmissionService,
    { requester: null },
  );
  /** The clear token the request of `interactionId` was delivered with. */
  const tokenOf = (interactionId: string) => {
    const s = sent.find((x) => x.op === 'interaction.request' && x.payload.interaction_id === interactionId);
    return s!.payload.callback_token as string;
  };
  const rowOf = (interactionId: string) => [...rows.values()].find((r) => r.interaction_id === interactionId)!;
  return { service, run, calls, lost, rows, admitted, sent, tokenOf, rowOf, outboxWrites };
}

const action = (payload: unknown, sequence = 1): ResultView =>
  ({ sequence, data: { action: 'interaction.requested', payload } }) as unknown as ResultView;

/** Lets the fire-and-forget superseding after a request's insert run. */
const flush = () => new Promise((r) => setImmediate(r));

describe('InteractionsService', () => {
  describe("a runner's request (action.requested)", () => {
    it("is written behind its run's fence and supersedes the pending requests of the conversation's earlier runs behind the same fence", async () => {
      const t = setup();
      const first = t.service.onAction(t.run('run-1'), action(request('q1')));
      await first.written;
      const other = t.service.onAction(t.run('run-x', 'conv-other'), action(request('qx')));
      await other.written;
      const second = t.service.onAction(t.run('run-2'), action(request('q2')));
      expect(second.refused).toBeNull();
      await second.written;
      await flush();
      expect(t.calls).toEqual([
        'insert q1 run:run-1',
        'insert qx run:run-x',
        'insert q2 run:run-2',
        'close q1 superseded run:run-2',
      ]);
      expect([t.rowOf('q1').status, t.rowOf('qx').status, t.rowOf('q2').status]).toEqual([
        'superseded',
        'pending',
        'pending',
      ]);
    });

    it('a process that lost the run writes no request (FencedError) and supersedes nothing', async () => {
      const t = setup();
      await t.service.onAction(t.run('run-1'), action(request('q1'))).written;
      t.lost.add('run-2');
      const r = t.service.onAction(t.run('run-2'), action(request('q2')));
      await expect(r.written).rejects.toBeInstanceOf(FencedError);
      await flush();
      expect(t.calls).toEqual(['insert q1 run:run-1', 'insert q2 run:run-2']);
      expect(t.rowOf('q1').status).toBe('pending');
      expect(t.rows.size).toBe(1);
    });

    it('refused (the run fails, nothing written) when the run may not request, the request breaks a rule, or its id repeats in the run', async () => {
      const t = setup();
      const denied = t.service.onAction(t.run('run-1', 'conv-1', []), action(request('q1')));
      expect(denied).toMatchObject({ ops: [], written: null });
      expect(denied.refused).toMatch(/^interaction\.requested: not allowed in this run/);
      const r = t.run('run-2');
      expect(t.service.onAction(r, action({ ...request('q2'), kind: 'survey' })).refused).toMatch(
        /^interaction\.requested: payload\.kind/,
      );
      await t.service.onAction(r, action(request('q3'))).written;
      expect(t.service.onAction(r, action(request('q3'), 2)).refused).toBe(
        'interaction.requested: payload.interaction_id: "q3" was already requested in this run',
      );
      expect(t.calls).toEqual(['insert q3 run:run-2']);
    });

    it('any other action is recorded and ignored', () => {
      const t = setup();
      const r = t.service.onAction(t.run('run-1'), {
        sequence: 1,
        data: { action: 'message.pin' },
      } as unknown as ResultView);
      expect(r).toEqual({ ops: [], written: null, refused: null });
      expect(t.calls).toEqual([]);
    });
  });

  describe("a platform's submission", () => {
    it("of a runner's request is claimed unfenced (any process may take it) and admitted as an interaction.submitted event", async () => {
      const t = setup();
      await t.service.onAction(t.run('run-1'), action(request('q1'))).written;
      const row = t.rowOf('q1');
      t.lost.add('run-1'); // even a process that does not own the run takes it
      const out = await t.service.submit(row.id, { callback_token: t.tokenOf('q1'), values: { c: 'r' } });
      expect(out).toMatchObject({ id: row.id, status: 'submitted', disposition: 'started', run_id: 'run-next' });
      expect(t.calls).toEqual(['insert q1 run:run-1', 'claim q1 unfenced']);
      expect(t.admitted).toHaveLength(1);
      expect(t.admitted[0].event).toMatchObject({
        event_id: `interaction:${row.id}`,
        event_type: 'interaction.submitted',
      });
      expect(t.admitted[0].input).toMatchObject({ interaction: { interaction_id: 'q1', values: { c: 'r' } } });
    });

    it('a second submission gets 409 and admits nothing more; a forged token 401, another interaction named 401', async () => {
      const t = setup();
      await t.service.onAction(t.run('run-1'), action(request('q1'))).written;
      await t.service.onAction(t.run('run-2', 'conv-2'), action(request('q2'))).written;
      const row = t.rowOf('q1');
      await t.service.submit(row.id, { callback_token: t.tokenOf('q1'), values: { c: 'r' } });
      await expect(
        t.service.submit(row.id, { callback_token: t.tokenOf('q1'), values: { c: 'r' } }),
      ).rejects.toMatchObject({ code: 'conflict', details: { status: 'submitted' } });
      await expect(
        t.service.submit(t.rowOf('q2').id, { callback_token: t.tokenOf('q1'), values: { c: 'r' } }),
      ).rejects.toMatchObject({ code: 'unauthorized', details: { field: 'callback_token' } });
      await expect(t.service.submit(null, { callback_token: 'nope' })).rejects.toMatchObject({
        code: 'unauthorized',
      });
      expect(t.admitted).toHaveLength(1);
    });
  });

  describe("an MCP server's elicitation", () => {
    const params: ElicitationParams = {
      message: 'Your name?',
      requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
    };

    it("is written behind the call's fence; its answer is claimed behind the same fence and goes back to the waiting call", async () => {
      const t = setup();
      const r = t.run('run-1');
      const answer = t.service.elicit('run-1', params, new AbortController().signal);
      await flush();
      const row = [...t.rows.values()][0];
      const token = t.sent.find((s) => s.op === 'interaction.request')!.payload.callback_token as string;
      const out = await t.service.submit(row.id, {
        callback_token: token,
        action_id: 'accept',
        values: { name: 'Ada' },
      });
      expect(out).toMatchObject({ disposition: 'delivered', run_id: r.run_id });
      expect(await answer).toEqual({ action: 'accept', content: { name: 'Ada' } });
      expect(t.calls).toEqual([`insert ${row.interaction_id} call:run-1`, `claim ${row.interaction_id} call:run-1`]);
      expect(t.admitted).toEqual([]);
    });

    it('a claim refused by the fence (the run is lost here) answers 409 and closes the waiting call; nothing is submitted', async () => {
      const t = setup();
      t.run('run-1');
      const answer = t.service.elicit('run-1', params, new AbortController().signal);
      await flush();
      const row = [...t.rows.values()][0];
      const token = t.sent.find((s) => s.op === 'interaction.request')!.payload.callback_token as string;
      t.lost.add('run-1');
      const refused = t.service.submit(row.id, { callback_token: token, action_id: 'accept', values: { name: 'Ada' } });
      await expect(refused).rejects.toBeInstanceOf(DomainError);
      await expect(refused).rejects.toMatchObject({ code: 'conflict' });
      expect(await answer).toEqual({ action: 'cancel' });
      expect(t.rows.get(row.id)!.status).toBe('pending'); // the new owner (or the sweep) closes it
      expect(t.admitted).toEqual([]);
    });

    it('is declined without a row when the run may not request, or its process lost the run', async () => {
      const t = setup();
      t.run('run-1', 'conv-1', []);
      expect(await t.service.elicit('run-1', params, new AbortController().signal)).toEqual({ action: 'decline' });
      t.run('run-2');
      t.lost.add('run-2');
      expect(await t.service.elicit('run-2', params, new AbortController().signal)).toEqual({ action: 'decline' });
      expect(await t.service.elicit('run-none', params, new AbortController().signal)).toEqual({ action: 'decline' });
      expect(t.rows.size).toBe(0);
    });
  });
});
