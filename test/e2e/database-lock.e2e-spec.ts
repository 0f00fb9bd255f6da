import * as fs from 'node:fs';
import * as path from 'node:path';
import { Host, TestDatabase } from './harness';

jest.setTimeout(90_000);

/**
 * Issue 23 item 3: one process per SQLite database. Always SQLite (PostgreSQL is the database
 * several processes may share), whichever database the e2e run selected.
 */
describe('two hosts on one DATA_DIR', () => {
  const db = new TestDatabase();
  const file = path.join(db.dataDir, 'runner-host.sqlite');
  const env = { DATABASE_URL: `sqlite:${file}` };

  afterAll(async () => {
    await db.drop();
  });

  it('refuses the second host naming the file and the holder; the first keeps serving', async () => {
    const first = await new Host(db, env).start();
    try {
      const second = new Host(db, env);
      const proc = await second.launch();
      const code = await new Promise<number | null>((resolve) => proc.child.once('exit', resolve));
      expect(code).not.toBe(0);
      expect(code).not.toBeNull();
      await proc.closed; // the end of the log may still be in the pipe at 'exit'
      const logs = proc.logs();
      expect(logs).toContain(`the database ${file} is in use by process ${first.proc.child.pid}`);
      expect(logs).toContain(`lock file ${file}.lock`);
      // It never served: nothing listens on its port.
      await expect(fetch(`${second.http}/health/live`)).rejects.toThrow();

      // The first still answers reads and writes.
      expect((await first.api('GET', '/health/ready')).status).toBe(200);
      expect((await first.api('POST', '/v1/admin/api-keys', { name: 'after-refusal', role: 'platform' })).status).toBe(
        201,
      );
    } finally {
      await first.stop();
    }
  });

  it('a lock left behind by kill -9 does not prevent a restart, and the restarted host holds it', async () => {
    const first = await new Host(db, env).start();
    expect(await first.stop('SIGKILL')).toBeNull();
    expect(fs.existsSync(`${file}.lock`)).toBe(true); // the stale lock file is still there

    const restarted = await new Host(db, env).start();
    try {
      expect((await restarted.api('GET', '/v1/admin/api-keys')).status).toBe(200);
      const third = new Host(db, env);
      const proc = await third.launch();
      expect(await new Promise<number | null>((resolve) => proc.child.once('exit', resolve))).toBe(1);
      // At 'exit' the end of the log may still be in the pipe.
      await proc.closed;
      expect(proc.logs()).toContain(`in use by process ${restarted.proc.child.pid}`);
    } finally {
      await restarted.stop();
    }
  });

  it('a host stopped with SIGTERM releases the lock for the next one', async () => {
    const first = await new Host(db, env).start();
    await first.stop();
    const next = await new Host(db, env).start();
    expect((await next.api('GET', '/health/ready')).status).toBe(200);
    await next.stop();
  });
});
