import type { TestingModule } from '@nestjs/testing';
import {
  HotStore,
  RunsRepository,
  outboxAfterUnit,
  outboxOfRunUnit,
  outboxUnit,
  pendingHeadsUnit,
  resultUnit,
  failedPageUnit,
  webhookDeliveredUnit,
  webhookFailedUnit,
  webhookRetryUnit,
  type NewOutboxRow,
  type Unit,
} from '@libs/persistence';
import { DIALECTS, driverError, storesModule, UNIQUE_VIOLATION, type TestDatabase } from './support/databases';
import { newResult, T0 } from './support/run-rows';

jest.setTimeout(60_000);

function op(runId: string, sequence: number, webhook: boolean, overrides: Partial<NewOutboxRow> = {}): NewOutboxRow {
  return {
    delivery_id: `${runId}-d${sequence}`,
    run_id: runId,
    agent_id: 'agent',
    sequence,
    op: 'message.send',
    idempotency_key: `${runId}:${sequence}`,
    reply_target: { chat: 1 },
    target_delivery_id: null,
    result_sequence: sequence,
    payload: { text: `part ${sequence}`, part: sequence - 1 },
    created_at: T0 + sequence,
    webhook_url: webhook ? 'https://hooks.example.com/x' : null,
    webhook_secret_env: webhook ? 'RUNNERHOST_SECRET_X' : null,
    webhook_state: webhook ? 'pending' : 'none',
    ...overrides,
  };
}

/** A result and its ops in one unit, then a unit that fails after writing both. */
function* resultThenFail(runId: string): Unit<void> {
  yield* resultUnit(newResult(runId, 9), null, [op(runId, 9, false)]);
  throw new Error('failed on purpose');
}

describe.each(DIALECTS)('delivery outbox on %s', (_name, factory) => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let hot: HotStore;

  beforeAll(async () => {
    db = await factory();
    moduleRef = await storesModule(db, [RunsRepository]);
    hot = moduleRef.get(HotStore);
  });

  afterAll(async () => {
    await moduleRef?.close();
    await db?.dispose();
  });

  it('ops commit with the result they derive from, or not at all', async () => {
    await hot.write(() => resultUnit(newResult('r1', 1), null, [op('r1', 1, false), op('r1', 2, false)]));
    await expect(hot.write(() => resultThenFail('r1'))).rejects.toThrow('failed on purpose');
    const ops = await hot.read(outboxAfterUnit('r1', 0, 100));
    expect(ops.map((o) => [o.sequence, o.payload, o.reply_target, o.webhook_state])).toEqual([
      [1, { text: 'part 1', part: 0 }, { chat: 1 }, 'none'],
      [2, { text: 'part 2', part: 1 }, { chat: 1 }, 'none'],
    ]);
    expect((await hot.read(outboxAfterUnit('r1', 1, 100))).map((o) => o.sequence)).toEqual([2]);
    // One sequence per run: a second op 2 is refused (and its result with it).
    const dup = await driverError(
      hot.write(() => resultUnit(newResult('r1', 3), null, [op('r1', 2, false, { delivery_id: 'x' })])),
    );
    expect(dup.code).toMatch(UNIQUE_VIOLATION);
  });

  it('the webhook queue: the first pending op of each run, due first; retries, delivery, failure of the rest', async () => {
    await hot.write(() =>
      outboxUnit([op('a', 1, true), op('a', 2, true), op('a', 3, true), op('b', 1, true), op('c', 1, false)]),
    );
    const heads = async () => (await hot.read(pendingHeadsUnit(10, 10))).map((o) => `${o.run_id}${o.sequence}`);
    expect(await heads()).toEqual(['a1', 'b1']);
    await hot.write(() => webhookRetryUnit('a-d1', 1, T0 + 10_000, 'HTTP 500'));
    expect(await heads()).toEqual(['b1', 'a1']); // a1 now waits until its retry time
    await hot.write(() => webhookDeliveredUnit('a-d1', 2, T0 + 20_000, null));
    expect(await heads()).toEqual(['b1', 'a2']); // by due time: b1 was created before a2
    const [a2] = await hot.read(outboxOfRunUnit('a', 10)).then((r) => r.filter((o) => o.sequence === 2));
    expect(await hot.write(() => webhookFailedUnit(a2, 15, 'timeout'))).toBe(1); // a3 failed with it
    expect(await heads()).toEqual(['b1']);
    const failed = await hot.read(failedPageUnit(2_147_483_647, 10));
    expect(failed.map((o) => [o.run_id, o.sequence, o.attempts, o.last_error])).toEqual([
      ['a', 3, 0, 'not sent: op 2 of the run failed before it'],
      ['a', 2, 15, 'timeout'],
    ]);
    expect((await hot.read(failedPageUnit(failed[0].id, 10))).map((o) => o.sequence)).toEqual([2]);
    const a = await hot.read(outboxOfRunUnit('a', 10));
    expect(a.map((o) => [o.sequence, o.webhook_state, o.attempts])).toEqual([
      [1, 'delivered', 2],
      [2, 'failed', 15],
      [3, 'failed', 0],
    ]);
    expect(a[0].delivered_at).toBe(T0 + 20_000);
  });

  it('the webhook queue holds at most N heads per endpoint, so a busy endpoint cannot hide a quiet one', async () => {
    const dead = 'https://dead.example.com/hook';
    const healthy = 'https://healthy.example.com/hook';
    const busy = Array.from({ length: 12 }, (_, i) =>
      op(`dead${i}`, 1, true, { webhook_url: dead, created_at: T0 - 1000 + i }),
    );
    await hot.write(() => outboxUnit([...busy, op('quiet', 1, true, { webhook_url: healthy, created_at: T0 + 5 })]));
    const heads = await hot.read(pendingHeadsUnit(3, 5)); // (b1 of the test above is still pending)
    expect(heads.map((o) => o.run_id)).toEqual(['dead0', 'dead1', 'dead2', 'b', 'quiet']);
    const unfair = await hot.read(pendingHeadsUnit(100, 5)); // what one ordered list would give
    expect(unfair.map((o) => o.run_id)).not.toContain('quiet');
  });
});
