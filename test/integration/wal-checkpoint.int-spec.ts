import * as fs from 'node:fs';
import type { TestingModule } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import { HotStore, outboxUnit, type NewOutboxRow } from '@libs/persistence';
import { sqliteFileDatabase, storesModule, type TestDatabase } from './support/databases';
import { T0 } from './support/run-rows';

jest.setTimeout(60_000);

const MiB = 1024 * 1024;

function bigOp(i: number): NewOutboxRow {
  return {
    delivery_id: `load-${i}`,
    run_id: `load-run-${Math.floor(i / 50)}`,
    agent_id: 'agent-1',
    sequence: (i % 50) + 1,
    op: 'message.edit',
    idempotency_key: `load:${i}`,
    reply_target: null,
    target_delivery_id: null,
    result_sequence: null,
    payload: { text: `${i} `.padEnd(8 * 1024, 'x') },
    created_at: T0 + i,
    webhook_url: null,
    webhook_secret_env: null,
    webhook_state: 'none',
  };
}

async function until<T>(what: string, probe: () => T | false, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = probe();
    if (v !== false) {
      return v;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('SQLite WAL after load (checkpoint worker, libs/persistence/src/hot/checkpointer.ts)', () => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let hot: HotStore;
  let walFile: string;

  beforeAll(async () => {
    db = await sqliteFileDatabase();
    moduleRef = await storesModule(db, []);
    hot = moduleRef.get(HotStore);
    walFile = `${(db.config as { file: string }).file}-wal`;
  });

  afterAll(async () => {
    await moduleRef?.close();
    await db?.dispose();
  });

  const walSize = () => (fs.existsSync(walFile) ? fs.statSync(walFile).size : 0);

  it('returns to zero bytes once the host is idle, after growing under load', async () => {
    let peak = 0;
    for (let batch = 0; batch < 40; batch++) {
      // ~0.4 MiB per unit, group-committed: the WAL grows faster than one PASSIVE checkpoint per second keeps up with
      await Promise.all(Array.from({ length: 50 }, (_, i) => hot.write(() => outboxUnit([bigOp(batch * 50 + i)]))));
      peak = Math.max(peak, walSize());
    }
    expect(peak).toBeGreaterThan(4 * MiB);
    await until('an empty WAL', () => walSize() === 0 && hot.wal()!.wal_bytes === 0);
    expect(hot.wal()!.checkpoint_error).toBeNull();
    // The data is all there (the checkpoint moved it into the database file).
    const [{ n }] = await moduleRef
      .get(DataSource)
      .query<{ n: number }[]>('SELECT COUNT(*) AS n FROM "delivery_outbox"');
    expect(Number(n)).toBe(2000);
  });
});
