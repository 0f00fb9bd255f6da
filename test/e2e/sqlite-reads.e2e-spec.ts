import * as path from 'node:path';
import Database from 'better-sqlite3';
import { stillWaiting } from '../integration/support/waiting';
import { Host, TestDatabase } from './harness';

jest.setTimeout(90_000);

const KB = '/v1/admin/knowledge-bases';

/**
 * Admin reads over HTTP while another request's admin transaction stays open: they run on the
 * host's read-only SQLite connection, so they answer at once with the committed rows instead of
 * waiting for the transaction (and failing 503 `database.busy` past SQLITE_BUSY_WAIT_MS)
 * (docs/durability.md, "Reads on their own connection"). The transaction stays open here because
 * its BEGIN waits for a writer lock another connection holds (an operator's shell, a backup).
 * Always SQLite, whichever database the e2e run selected.
 */
describe('SQLite admin reads while another request’s transaction waits for the writer lock', () => {
  const db = new TestDatabase();
  const file = path.join(db.dataDir, 'runner-host.sqlite');
  const host = new Host(db, { DATABASE_URL: `sqlite:${file}`, SQLITE_BUSY_WAIT_MS: '5000' });
  let other: Database.Database;

  beforeAll(async () => {
    await host.start();
    other = new Database(file);
    expect((await host.api('POST', KB, { kb_id: 'docs', name: 'Docs' })).status).toBe(201);
    const doc = { name: 'a.txt', content_type: 'text/plain', content: 'the volcano erupts at dawn' };
    expect((await host.api('POST', `${KB}/docs/documents`, doc)).status).toBe(201);
  });

  afterAll(async () => {
    if (other?.inTransaction) {
      other.exec('ROLLBACK');
    }
    other?.close();
    await host.stop();
    await db.drop();
  });

  it('a knowledge search and admin GETs answer with the committed rows while an upload’s transaction waits; the upload then lands', async () => {
    other.exec('BEGIN IMMEDIATE');
    const upload = host.api('POST', `${KB}/docs/documents`, {
      name: 'b.txt',
      content_type: 'text/plain',
      content: 'a second volcano document',
    });
    let uploaded = false;
    void upload.then(() => (uploaded = true));
    // The upload's transaction is open (holding the connection's gate) and waits for the lock. A
    // read that waited for it would answer only after the lock is released below — or 503 past
    // the 5 s bound — so these answer while the lock is held.
    expect(await stillWaiting(upload, 10)).toBe(true);
    const search = await host.api('POST', `${KB}/docs/search`, { query_text: 'volcano', top_k: 5 });
    expect(search.status).toBe(200);
    expect(search.body.results.map((r: { content: Array<{ text: string }> }) => r.content[0].text)).toEqual([
      'the volcano erupts at dawn',
    ]);
    const kb = await host.api('GET', `${KB}/docs`);
    expect(kb.status).toBe(200);
    expect(kb.body).toMatchObject({ kb_id: 'docs', document_count: 1 });
    expect((await host.api('GET', `${KB}/docs/documents`)).body.items).toHaveLength(1);
    expect((await host.api('GET', '/v1/admin/workspaces/default')).status).toBe(200);
    expect(uploaded).toBe(false); // the lock is still held: the upload has not run
    other.exec('ROLLBACK');
    expect((await upload).status).toBe(201);
    const after = await host.api('POST', `${KB}/docs/search`, { query_text: 'volcano', top_k: 5 });
    expect(after.body.results).toHaveLength(2);
    expect((await host.api('GET', `${KB}/docs`)).body).toMatchObject({ document_count: 2 });
  });
});
