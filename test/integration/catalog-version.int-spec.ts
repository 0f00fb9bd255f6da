import { DataSource } from 'typeorm';
import type { TestingModule } from '@nestjs/testing';
import { CATALOG_TABLES, CatalogVersionRepository, PluginsRepository, Transactions } from '@libs/persistence';
import { PERSISTENT_DIALECTS, isPostgres, storesModule, type TestDatabase } from './support/databases';

jest.setTimeout(60_000);

/*
 * The catalogue version row (docs/scale-out.md#admin-writes): every write of a catalogue table
 * bumps it in the write's own transaction, whichever process (connection) made it; a write that
 * rolls back bumps nothing.
 */
describe.each(PERSISTENT_DIALECTS)('catalogue version on %s', (_name, factory) => {
  let db: TestDatabase;
  let mod: TestingModule;
  let versions: CatalogVersionRepository;
  let plugins: PluginsRepository;
  let ds: DataSource;

  beforeEach(async () => {
    db = await factory();
    mod = await storesModule(db, [CatalogVersionRepository, PluginsRepository, Transactions]);
    versions = mod.get(CatalogVersionRepository);
    plugins = mod.get(PluginsRepository);
    ds = mod.get(DataSource);
  });

  afterEach(async () => {
    await mod.close();
    await db.dispose();
  });

  const plugin = (n: number) => ({
    plugin_id: `acme/p${n}`,
    author: 'acme',
    name: `p${n}`,
    token_hash: `h${n}`.padEnd(64, '0'),
    token_prefix: 'rh_',
    created_at: 1,
    token_issued_at: 1,
  });

  it('every catalogue table carries the trigger', async () => {
    const rows: { t: string }[] = isPostgres(ds)
      ? await ds.query(
          `SELECT DISTINCT event_object_table AS t FROM information_schema.triggers WHERE trigger_name LIKE 'catalog_version_%'`,
        )
      : await ds.query(
          `SELECT DISTINCT tbl_name AS t FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'catalog_version_%'`,
        );
    expect(rows.map((r) => r.t).sort()).toEqual([...CATALOG_TABLES].sort());
  });

  it('an insert, an update and a delete each move the version, read by another connection', async () => {
    const v0 = await versions.read();
    await plugins.create(plugin(1));
    const v1 = await versions.read();
    expect(v1).toBeGreaterThan(v0);
    await plugins.replaceToken('acme/p1', 'z'.repeat(64), 'rh_', 2);
    const v2 = await versions.read();
    expect(v2).toBeGreaterThan(v1);
    expect(await plugins.delete('acme/p1')).toBe(true);
    expect(await versions.read()).toBeGreaterThan(v2);
  });

  it('a write that rolls back leaves the version as it was', async () => {
    const v0 = await versions.read();
    await expect(
      ds.transaction(async (m) => {
        await m.query(
          `INSERT INTO "plugins" ("plugin_id", "author", "name", "token_hash", "token_prefix", "created_at", "token_issued_at")
           VALUES ('acme/x', 'acme', 'x', '${'x'.repeat(64)}', 'rh_', 1, 1)`,
        );
        throw new Error('abort the admin write');
      }),
    ).rejects.toThrow('abort the admin write');
    expect(await versions.read()).toBe(v0);
    expect(await plugins.get('acme/x')).toBeNull();
  });
});
