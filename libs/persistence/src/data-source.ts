import * as fs from 'node:fs';
import * as path from 'node:path';
import type { DataSourceOptions } from 'typeorm';
import type { DatabaseConfig } from '@libs/config';
import { ENTITIES } from './entities';
import { MIGRATIONS } from './migrations';

/** TypeORM options for either dialect. synchronize is always off; migrations run at boot. */
export function dataSourceOptions(db: DatabaseConfig): DataSourceOptions {
  const common = {
    entities: ENTITIES,
    migrations: MIGRATIONS,
    synchronize: false,
    migrationsRun: true,
    logging: false,
  };
  if (db.type === 'postgres') {
    return { ...common, type: 'postgres', url: db.url, extra: { max: 10 } };
  }
  if (db.file !== ':memory:') {
    fs.mkdirSync(path.dirname(db.file), { recursive: true });
  }
  return {
    ...common,
    type: 'better-sqlite3',
    database: db.file,
    // WAL + synchronous=NORMAL: durable across process crashes, an order of magnitude cheaper
    // per commit than FULL (see bench/dispatch); busy_timeout covers checkpoints.
    prepareDatabase: (sqlite: { pragma(sql: string): unknown }) => {
      sqlite.pragma('journal_mode = WAL');
      sqlite.pragma('synchronous = NORMAL');
      sqlite.pragma('busy_timeout = 5000');
    },
  };
}
