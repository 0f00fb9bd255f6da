import { appendTranscriptUnit, stateSetUnit, type RunLease, type Unit } from '@libs/persistence';
import { PgHot } from '../../libs/persistence/src/hot/pg-driver';
import { leasedRuns, leaseStores, unlessDeadlock, type LeaseStores } from './support/leased-runs';
import { T0, transcriptRow } from './support/run-rows';

jest.setTimeout(180_000);

/**
 * The one lock order of a PostgreSQL group commit (docs/scale-out.md#one-lock-order): every lock
 * a group takes — the conversations' and transcripts' advisory locks, the run rows its host API
 * writes fence (FENCE_CALL) — is taken at the group's start in one order (advisory keys by lock id,
 * then run rows by run id), whatever the order of its units. Two writers (two processes' drivers)
 * commit groups over the same conversations and runs, listed in opposite orders, concurrently,
 * many rounds: before, each took its locks in unit order and PostgreSQL aborted one of them with
 * a deadlock (40P01; its writer replays the group unit by unit); now none does.
 */
describe('a group commit on postgres: one lock order for every lock it takes', () => {
  const CONVERSATIONS = 6;
  const ROUNDS = 40;
  let stores: LeaseStores;
  let leases: RunLease[];

  beforeAll(async () => {
    stores = await leaseStores(['p1', 'p2']);
    leases = await leasedRuns(stores.ds, CONVERSATIONS, ['p1', 'p2']);
  });

  afterAll(async () => {
    await stores?.dispose();
  });

  /** Per conversation: a transcript append (its advisory lock) and a host API state write of its run (its row). */
  function units(writer: string, round: number): (() => Unit<unknown>)[] {
    return leases.flatMap((lease, i) => [
      () =>
        appendTranscriptUnit(
          transcriptRow('user', `${writer} ${round}`, { conversation_id: `conv-${i}`, created_at: T0 + round }),
        ),
      () => stateSetUnit({ scope_key: `run:${lease.run_id}`, state_key: writer, value: String(round) }, T0, lease),
    ]);
  }

  it('two writers committing groups over the same conversations and runs in opposite orders: no deadlock, every group committed', async () => {
    const url = (stores.db.config as { url: string }).url;
    const a = new PgHot(url);
    const b = new PgHot(url);
    const deadlocks: string[] = [];
    let committed = 0;
    /** One group commit; a deadlock is recorded (the driver rolled it back), not thrown. */
    const group = async (w: PgHot, list: (() => Unit<unknown>)[]): Promise<void> => {
      if (await unlessDeadlock(deadlocks, () => w.runGroup(list))) {
        committed++;
      }
    };
    try {
      for (let round = 0; round < ROUNDS; round++) {
        // Overlapping parts too: a group rarely carries exactly the other's units.
        const mine = units('a', round);
        const theirs = units('b', round).reverse();
        await Promise.all([
          group(a, round % 2 === 0 ? mine : mine.slice(4)),
          group(b, round % 2 === 0 ? theirs : theirs.slice(0, -4)),
        ]);
      }
    } finally {
      await Promise.allSettled([a.close(), b.close()]);
    }
    expect(deadlocks).toEqual([]);
    expect(committed).toBe(ROUNDS * 2);
    const [{ n }] = await stores.ds.query<{ n: string }[]>(`SELECT COUNT(*) AS "n" FROM "transcript"`);
    const perRound = (full: number) => (ROUNDS / 2) * full + (ROUNDS / 2) * (full - 2);
    expect(Number(n)).toBe(2 * perRound(CONVERSATIONS));
  });

  it('groups that take advisory keys only (GROUP_KEYS, no run row), in opposite orders on two writers: no deadlock', async () => {
    const url = (stores.db.config as { url: string }).url;
    const a = new PgHot(url);
    const b = new PgHot(url);
    const deadlocks: string[] = [];
    let committed = 0;
    const appends = (writer: string, round: number): (() => Unit<unknown>)[] =>
      leases.map(
        (_l, i) => () =>
          appendTranscriptUnit(
            transcriptRow('user', `keys ${writer} ${round}`, { conversation_id: `keys-${i}`, created_at: T0 + round }),
          ),
      );
    try {
      for (let round = 0; round < ROUNDS; round++) {
        await Promise.all([
          unlessDeadlock(deadlocks, () => a.runGroup(appends('a', round))).then((ok) => ok && committed++),
          unlessDeadlock(deadlocks, () => b.runGroup(appends('b', round).reverse())).then((ok) => ok && committed++),
        ]);
      }
    } finally {
      await Promise.allSettled([a.close(), b.close()]);
    }
    expect(deadlocks).toEqual([]);
    expect(committed).toBe(ROUNDS * 2);
    // Every conversation's seqs gapless and distinct: its transcript lock was held by each append.
    const rows = await stores.ds.query<{ c: string; n: string; m: string }[]>(
      `SELECT "conversation_id" AS "c", COUNT(DISTINCT "seq") AS "n", MAX("seq") AS "m" FROM "transcript"
       WHERE "conversation_id" LIKE 'keys-%' GROUP BY 1`,
    );
    expect(rows).toHaveLength(CONVERSATIONS);
    for (const r of rows) {
      expect([Number(r.n), Number(r.m)]).toEqual([ROUNDS * 2, ROUNDS * 2]);
    }
  });
});
