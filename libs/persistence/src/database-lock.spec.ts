import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DatabaseLock, DatabaseLockedError } from './database-lock';

describe('DatabaseLock', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rh-lock-'));
  const file = path.join(dir, 'data', 'runner-host.sqlite');

  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('lets one holder in, refuses a second naming the file, the lock file and the holder pid', () => {
    const lock = DatabaseLock.acquire(file);
    expect(lock.lockFile).toBe(`${file}.lock`);
    expect(fs.statSync(lock.lockFile).mode & 0o777).toBe(0o600);
    let refused: unknown;
    try {
      DatabaseLock.acquire(file);
    } catch (e) {
      refused = e;
    }
    expect(refused).toBeInstanceOf(DatabaseLockedError);
    const error = refused as DatabaseLockedError;
    expect(error.holder).toEqual(expect.objectContaining({ pid: process.pid, hostname: os.hostname() }));
    expect(error.message).toContain(`the database ${file} is in use by process ${process.pid}`);
    expect(error.message).toContain(`lock file ${file}.lock`);
    lock.release();
  });

  it('is free again once the holder releases it (a process that ends releases it the same way)', () => {
    DatabaseLock.acquire(file).release();
    const again = DatabaseLock.acquire(file);
    again.release();
  });
});
