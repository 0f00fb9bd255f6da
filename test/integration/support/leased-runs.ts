import type { TestingModule } from '@nestjs/testing';
import { DatabaseError } from 'pg';
import { DataSource } from 'typeorm';
import { ENTITIES, HostProcessesRepository, HotStore, RunEntity, type NewRun, type RunLease } from '@libs/persistence';
import { postgresDatabase, storesModule, type TestDatabase } from './databases';
import { newRun } from './run-rows';

/** A fresh PostgreSQL store for the fence and lock-order suites: its tables empty, these host processes registered. */
export interface LeaseStores {
  db: TestDatabase;
  moduleRef: TestingModule;
  ds: DataSource;
  dispose(): Promise<void>;
}

export async function leaseStores(processIds: readonly string[]): Promise<LeaseStores> {
  const db = await postgresDatabase();
  const moduleRef = await storesModule(db, [HostProcessesRepository]);
  const ds = moduleRef.get(DataSource);
  await moduleRef.get(HotStore).drain();
  for (const entity of ENTITIES) {
    await ds.getRepository(entity).clear();
  }
  const processes = moduleRef.get(HostProcessesRepository);
  for (const id of processIds) {
    await processes.register({ id, instance: id, http_address: 'h:1', grpc_address: 'h:2' });
  }
  return {
    db,
    moduleRef,
    ds,
    dispose: async () => {
      await moduleRef.close();
      await db.dispose();
    },
  };
}

/** Inserts one run per conversation `<conversationPrefix><i>`, owned in turn by `owners` at attempt 1: their leases, in order. */
export async function leasedRuns(
  ds: DataSource,
  count: number,
  owners: readonly string[],
  conversationPrefix = 'conv-',
): Promise<RunLease[]> {
  const leases: RunLease[] = [];
  for (let i = 0; i < count; i++) {
    const owner = owners[i % owners.length];
    const run: NewRun = {
      ...newRun({ conversation_id: `${conversationPrefix}${i}` }),
      owner_process_id: owner,
      attempt: 1,
    };
    await ds.getRepository(RunEntity).insert(run);
    leases.push({ run_id: run.run_id, attempt: 1, owner_process_id: owner });
  }
  return leases;
}

/** Runs `fn`; a PostgreSQL deadlock (40P01) it throws is recorded in `deadlocks` instead. Answers whether fn finished. */
export async function unlessDeadlock(deadlocks: string[], fn: () => Promise<unknown>): Promise<boolean> {
  try {
    await fn();
    return true;
  } catch (e) {
    if (e instanceof DatabaseError && e.code === '40P01') {
      deadlocks.push(e.message);
      return false;
    }
    throw e;
  }
}
