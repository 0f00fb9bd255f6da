import * as fs from 'node:fs';
import * as path from 'node:path';
import { Host, TestDatabase } from './harness';

jest.setTimeout(60_000);

/** Issue 8 item 10: what the host writes to disk is its owner's only. */
describe('file modes of the embedded database', () => {
  const db = new TestDatabase();

  afterAll(async () => {
    await db.drop();
  });

  it('creates DATA_DIR 0700 and the SQLite file (and its WAL) 0600', async () => {
    const dir = path.join(db.dataDir, 'fresh', 'data');
    const file = path.join(dir, 'host.sqlite');
    const host = await new Host(db, { DATA_DIR: dir, DATABASE_URL: `sqlite:${file}` }).start();
    try {
      // Something to write, so that the WAL exists.
      expect((await host.api('POST', '/v1/admin/api-keys', { name: 'modes', role: 'platform' })).status).toBe(201);
      const mode = (p: string) => fs.statSync(p).mode & 0o777;
      expect(mode(dir)).toBe(0o700);
      expect(mode(file)).toBe(0o600);
      expect(mode(`${file}-wal`)).toBe(0o600);
    } finally {
      await host.stop();
    }
  });
});
