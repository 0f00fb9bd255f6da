import { DataSource } from 'typeorm';
import {
  checkPostgresVersion,
  dataSourceOptions,
  MIN_POSTGRES_VERSION_NUM,
  openDataSource,
  PostgresVersionError,
} from '@libs/persistence';
import { postgresDatabase, type TestDatabase } from './support/databases';

jest.setTimeout(60_000);

describe('the PostgreSQL version check against the real server (docs/deployment.md#postgresql-version)', () => {
  let db: TestDatabase;
  let ds: DataSource | null = null;

  beforeEach(async () => {
    db = await postgresDatabase();
  });

  afterEach(async () => {
    await ds?.destroy();
    ds = null;
    await db.dispose();
  });

  it("reads the server's own version number and admits it (the test server is 14 or later)", async () => {
    ds = await new DataSource({ ...dataSourceOptions(db.config), migrationsRun: false }).initialize();
    const shown: Array<{ server_version_num: string }> = await ds.query('SHOW server_version_num');
    const found = await checkPostgresVersion(ds);
    expect(found.versionNum).toBe(Number(shown[0]?.server_version_num));
    expect(found.versionNum).toBeGreaterThanOrEqual(MIN_POSTGRES_VERSION_NUM);
    expect(found.version).toMatch(/^\d+\.\d+/);
  });

  it('refuses a server below the minimum, naming the version found and the one required', async () => {
    ds = await new DataSource({ ...dataSourceOptions(db.config), migrationsRun: false }).initialize();
    const { version, versionNum } = await checkPostgresVersion(ds);
    const refused = checkPostgresVersion(ds, versionNum + 10000);
    await expect(refused).rejects.toBeInstanceOf(PostgresVersionError);
    await expect(refused).rejects.toThrow(
      `PostgreSQL ${version} (server_version_num ${versionNum}) is older than the host needs: PostgreSQL ${Math.floor(versionNum / 10000) + 1} or later`,
    );
  });

  it('openDataSource, which checks the version first, opens and migrates a database on this server', async () => {
    ds = await openDataSource(dataSourceOptions(db.config));
    expect(await ds.showMigrations()).toBe(false);
  });
});
