import * as fs from 'node:fs';
import type { TestingModule } from '@nestjs/testing';
import Database from 'better-sqlite3';
import { DataSource, type EntityManager } from 'typeorm';
import {
  CatalogVersionRepository,
  HotStore,
  KbChunkEntity,
  KbDocumentEntity,
  KnowledgeBaseEntity,
  KnowledgeRepository,
  one,
  sqliteReadConnectionOf,
  Transactions,
  WorkspaceEntity,
  type HotStatement,
} from '@libs/persistence';
import { sqliteFileDatabase, sqliteMemoryDatabase, storesModule, type TestDatabase } from './support/databases';

jest.setTimeout(60_000);

/** The gate's bound here: a read that waited for the open transaction would fail 503 after it. */
const BUSY_WAIT_MS = 300;

const ws = (id: string, name: string): WorkspaceEntity =>
  Object.assign(new WorkspaceEntity(), { workspace_id: id, name, quotas: {}, created_at: 1, updated_at: 1 });

const kbRow = (kbId: string): KnowledgeBaseEntity =>
  Object.assign(new KnowledgeBaseEntity(), {
    kb_id: kbId,
    name: kbId,
    description: '',
    chunk_size: 1000,
    chunk_overlap: 150,
    created_at: 1,
    updated_at: 1,
  });

const doc = (kbId: string, documentId: string, chunks: number): KbDocumentEntity => ({
  document_id: documentId,
  kb_id: kbId,
  name: `${documentId}.txt`,
  content_type: 'text/plain',
  metadata: {},
  size: chunks * 10,
  chunk_count: chunks,
  created_at: 1,
  status: 'ready',
  updated_at: 1,
});

const chunks = (n: number) =>
  Array.from({ length: n }, (_, position) => ({ position, content: `volcano erupts ${position}`, metadata: {} }));

/** A workspace's name by a hot-store read (the run path's read path). */
const WORKSPACE_NAME: HotStatement = {
  name: 'test_workspace_name',
  sqlite: 'SELECT "name" FROM "workspaces" WHERE "workspace_id" = ?',
  pg: 'SELECT "name" FROM "workspaces" WHERE "workspace_id" = $1',
};

/** A promise and the function that resolves it (a step the test lets happen). */
function signal(): { wait: Promise<void>; go: () => void } {
  let go!: () => void;
  const wait = new Promise<void>((r) => (go = r));
  return { wait, go };
}

/**
 * Reads outside a transaction run on the host's read-only SQLite connection: they neither wait
 * for another caller's open transaction nor see its rows; they see every commit, the caller's own
 * included (docs/durability.md, "Reads on their own connection").
 */
describe('SQLite: reads on their own connection', () => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let ds: DataSource;
  let tx: Transactions;
  let hot: HotStore;
  let kbs: KnowledgeRepository;

  beforeEach(async () => {
    db = await sqliteFileDatabase();
    moduleRef = await storesModule({ ...db, config: { ...db.config, busyWaitMs: BUSY_WAIT_MS } } as TestDatabase, [
      Transactions,
      KnowledgeRepository,
      CatalogVersionRepository,
    ]);
    ds = moduleRef.get(DataSource);
    tx = moduleRef.get(Transactions);
    hot = moduleRef.get(HotStore);
    kbs = moduleRef.get(KnowledgeRepository);
  });

  afterEach(async () => {
    await moduleRef?.close();
    await db.dispose();
  });

  const names = async (): Promise<string[]> =>
    (await ds.getRepository(WorkspaceEntity).find({ order: { workspace_id: 'ASC' } })).map((w) => w.name);
  const rawNames = async (): Promise<string[]> =>
    (await ds.query<{ name: string }[]>('SELECT "name" FROM "workspaces" ORDER BY "workspace_id"')).map((r) => r.name);
  const hotName = async (id: string): Promise<string | undefined> =>
    (await hot.read(one<{ name: string }>(WORKSPACE_NAME, [id])))?.name;

  /** An admin transaction that did `work` and stays open until `commit` (or `rollBack`) is called. */
  function openTransaction(work: (m: EntityManager) => Promise<unknown>) {
    const inside = signal();
    const end = signal();
    let failing = false;
    const done = tx.run(async (m) => {
      await work(m);
      inside.go();
      await end.wait;
      if (failing) {
        throw new Error('rolled back');
      }
    });
    return {
      open: inside.wait,
      commit: () => {
        end.go();
        return done;
      },
      rollBack: () => {
        failing = true;
        end.go();
        return done.catch(() => undefined);
      },
    };
  }

  it('a find, a raw SELECT and a search answer while another caller’s transaction is open, without its rows; after COMMIT they see them', async () => {
    await kbs.insertKnowledgeBase(kbRow('kb'));
    const t = openTransaction(async (m) => {
      await m.insert(WorkspaceEntity, ws('a', 'uncommitted'));
      await m.insert(KbDocumentEntity, doc('kb', 'd1', 3));
      await m.insert(
        KbChunkEntity,
        chunks(3).map((c) => ({ ...c, kb_id: 'kb', document_id: 'd1' })),
      );
    });
    await t.open;
    // Each read answers here, with the transaction still open: one that waited for it would fail
    // 503 database.busy after BUSY_WAIT_MS (the transaction ends only below).
    expect(await names()).toEqual(['Default workspace']);
    expect(await rawNames()).toEqual(['Default workspace']);
    expect(await ds.getRepository(WorkspaceEntity).count()).toBe(1);
    expect(await kbs.search('kb', ['volcano'], [], 10)).toEqual([]);
    expect(await kbs.documents('kb', null, 10)).toEqual([]);
    await t.commit();
    expect(await names()).toEqual(['uncommitted', 'Default workspace']);
    expect(await rawNames()).toEqual(['uncommitted', 'Default workspace']);
    expect((await kbs.search('kb', ['volcano'], [], 10)).length).toBe(3);
    expect((await kbs.documents('kb', null, 10)).map((d) => d.document_id)).toEqual(['d1']);
  });

  it('a rolled-back transaction’s rows are never seen by another caller', async () => {
    const t = openTransaction((m) => m.insert(WorkspaceEntity, ws('a', 'rolled back')));
    await t.open;
    expect(await names()).toEqual(['Default workspace']);
    await t.rollBack();
    expect(await names()).toEqual(['Default workspace']);
  });

  it('read-your-writes: a caller’s read sees its own committed write (autocommit, save(), transaction, hot writer)', async () => {
    const repo = ds.getRepository(WorkspaceEntity);
    await repo.insert(ws('a', 'inserted'));
    expect(await repo.findOneBy({ workspace_id: 'a' })).toMatchObject({ name: 'inserted' });
    await repo.save(ws('b', 'saved'));
    expect(await hotName('b')).toBe('saved');
    await repo.update({ workspace_id: 'a' }, { name: 'updated' });
    expect(await rawNames()).toEqual(['updated', 'saved', 'Default workspace']);
    await tx.run((m) => m.insert(WorkspaceEntity, ws('c', 'in a transaction')));
    expect(await hotName('c')).toBe('in a transaction');
    expect(await repo.findOneBy({ workspace_id: 'c' })).toMatchObject({ name: 'in a transaction' });
    await repo.delete({ workspace_id: 'c' });
    expect(await repo.findOneBy({ workspace_id: 'c' })).toBeNull();
  });

  it('reads inside a transaction see its own uncommitted rows (they stay on its connection)', async () => {
    await tx.run(async (m) => {
      await m.insert(WorkspaceEntity, ws('a', 'mine'));
      expect((await m.find(WorkspaceEntity, { order: { workspace_id: 'ASC' } })).map((w) => w.name)).toEqual([
        'mine',
        'Default workspace',
      ]);
      expect(await m.query('SELECT "name" FROM "workspaces" WHERE "workspace_id" = ?', ['a'])).toEqual([
        { name: 'mine' },
      ]);
      // Another caller (not this transaction's manager) reads the committed state, at once.
      expect(await names()).toEqual(['Default workspace']);
    });
    expect(await names()).toEqual(['mine', 'Default workspace']);
  });

  it('a hot-store read does not see an open admin transaction’s rows, nor the catalogue version it bumped', async () => {
    const before = await moduleRef.get(CatalogVersionRepository).read();
    const t = openTransaction(async (m) => {
      await m.insert(WorkspaceEntity, ws('a', 'uncommitted'));
      await m.insert(KnowledgeBaseEntity, kbRow('kb')); // a catalogue table: its trigger bumps the version
    });
    await t.open;
    expect(await hotName('a')).toBeUndefined();
    expect(await moduleRef.get(CatalogVersionRepository).read()).toBe(before);
    await t.rollBack();
    expect(await hotName('a')).toBeUndefined();
    expect(await moduleRef.get(CatalogVersionRepository).read()).toBe(before);
    await tx.run((m) => m.insert(KnowledgeBaseEntity, kbRow('kb2')));
    expect(await moduleRef.get(CatalogVersionRepository).read()).toBeGreaterThan(before);
  });

  it('writes, PRAGMAs and statements that do not prepare stay on the writer connection', async () => {
    // WITH … INSERT starts like a read but writes: it runs (on the writer), it is not refused as read-only.
    await ds.query(
      `WITH n(name) AS (SELECT 'from a CTE') INSERT INTO "workspaces" ("workspace_id", "name", "quotas", "created_at", "updated_at") SELECT 'w', name, '{}', 1, 1 FROM n`,
    );
    expect(await names()).toEqual(['Default workspace', 'from a CTE']);
    // INSERT … RETURNING returns rows and writes.
    expect(
      await ds.query(
        `INSERT INTO "workspaces" ("workspace_id", "name", "quotas", "created_at", "updated_at") VALUES ('x', 'returned', '{}', 1, 1) RETURNING "name"`,
      ),
    ).toEqual([{ name: 'returned' }]);
    // A connection setting answers the writer's (TypeORM turns foreign keys on there; a fresh connection has them off).
    expect(await ds.query('PRAGMA foreign_keys')).toEqual([{ foreign_keys: 1 }]);
    // Bad statements fail as before (the writer's runner prepares them: better-sqlite3's error,
    // whose class may be another test file's — so matched by message), and change nothing.
    await expect(ds.query('SELECT * FROM "no_such_table"')).rejects.toMatchObject({
      message: expect.stringMatching(/no such table/),
    });
    await expect(ds.query('SELEC 1')).rejects.toMatchObject({ message: expect.stringMatching(/syntax error/) });
    expect(await names()).toEqual(['Default workspace', 'from a CTE', 'returned']);
  });

  it('a write still waits for another caller’s open transaction (the gate is unchanged)', async () => {
    const t = openTransaction((m) => m.insert(WorkspaceEntity, ws('a', 'first')));
    await t.open;
    const write = ds.getRepository(WorkspaceEntity).insert(ws('b', 'second'));
    let written = false;
    void write.then(() => (written = true));
    expect(await names()).toEqual(['Default workspace']); // a read answers meanwhile
    expect(written).toBe(false);
    await t.commit();
    await write;
    expect(await names()).toEqual(['first', 'second', 'Default workspace']);
  });

  it('the read connection holds no read open between statements: a TRUNCATE checkpoint empties the WAL', async () => {
    const file = (db.config as { file: string }).file;
    for (let i = 0; i < 50; i++) {
      await ds.getRepository(WorkspaceEntity).insert(ws(`w${i}`, `n${i}`));
    }
    // (The host's checkpoint worker truncates only after 2 s without a commit: the WAL has frames here.)
    expect(await names()).toHaveLength(51);
    expect(await hotName('w1')).toBe('n1');
    const reader = sqliteReadConnectionOf(ds)!;
    expect(reader.readonly).toBe(true);
    expect(reader.inTransaction).toBe(false);
    expect(fs.statSync(`${file}-wal`).size).toBeGreaterThan(0);
    const other = new Database(file);
    try {
      other.pragma('busy_timeout = 0');
      // A read left open on the read connection would hold the checkpoint back (busy)…
      const open = reader.prepare('SELECT "name" FROM "workspaces"').iterate();
      open.next();
      expect(other.pragma('wal_checkpoint(TRUNCATE)')).toEqual([expect.objectContaining({ busy: 1 })]);
      open.return?.();
      // …the host's own reads leave none open.
      expect(other.pragma('wal_checkpoint(TRUNCATE)')).toEqual([{ busy: 0, log: 0, checkpointed: 0 }]);
      expect(fs.statSync(`${file}-wal`).size).toBe(0);
    } finally {
      other.close();
    }
    expect(await names()).toHaveLength(51);
  });

  it('the read connection is read-only: a write through it is refused', () => {
    const reader = sqliteReadConnectionOf(ds)!;
    let refused: unknown;
    try {
      reader.prepare(`DELETE FROM "workspaces"`).run();
    } catch (e) {
      refused = e;
    }
    expect(refused).toMatchObject({ message: expect.stringMatching(/readonly database/) });
  });
});

describe('SQLite :memory: has no read connection: reads stay on the one connection', () => {
  it('answers reads and writes as before', async () => {
    const db = await sqliteMemoryDatabase();
    const moduleRef = await storesModule(db, [Transactions]);
    try {
      const ds = moduleRef.get(DataSource);
      expect(sqliteReadConnectionOf(ds)).toBeUndefined();
      await moduleRef.get(Transactions).run((m) => m.insert(WorkspaceEntity, ws('a', 'memory')));
      expect((await ds.getRepository(WorkspaceEntity).findOneBy({ workspace_id: 'a' }))?.name).toBe('memory');
    } finally {
      await moduleRef.close();
    }
  });
});
