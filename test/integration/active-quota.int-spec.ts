import type { TestingModule } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import {
  ENTITIES,
  HotStore,
  RunEntity,
  RunsRepository,
  WorkspacesRepository,
  type AdmissionRows,
  type AdmitOutcome,
} from '@libs/persistence';
import { DIALECTS, isPostgres, storesModule, type TestDatabase } from './support/databases';
import { logOf, newEvent, newRun, T0 } from './support/run-rows';

jest.setTimeout(60_000);

/**
 * A workspace's `max_active_runs` counted over the database (docs/tenancy.md#quotas): the
 * admission unit counts the workspace's running runs of every process under the workspace's lock.
 * On PostgreSQL two "processes" (two modules, each its own connections and writer) admit at once
 * and never exceed it; on SQLite the one writer serialises the same units.
 */

/** An event without a conversation of `workspace`, started at admission, counted against `max`. */
function startRows(workspace: string | null, max: number | null): AdmissionRows {
  const run = newRun({ conversation_id: null, workspace_id: workspace, owner_process_id: 'p1' });
  const event = { ...newEvent({ conversation_id: null, run_id: run.run_id }), event_id: run.event_id };
  return {
    event,
    readmit: false,
    log: logOf(event),
    user: null,
    run,
    terminal: null,
    conversation: null,
    active_quota: max === null ? null : { workspace_id: workspace ?? 'default', max },
  };
}

const started = (o: AdmitOutcome) => o.admitted && o.disposition === 'started';
const refused = (o: AdmitOutcome) => !o.admitted && o.existing === null && o.active !== undefined;

describe.each(DIALECTS)('max_active_runs over the database on %s', (_name, factory) => {
  let db: TestDatabase;
  let a: TestingModule;
  let b: TestingModule;
  let ds: DataSource;

  beforeAll(async () => {
    db = await factory();
    a = await storesModule(db, [RunsRepository, WorkspacesRepository]);
    ds = a.get(DataSource);
    // A second process on PostgreSQL (its own pool and writer); on SQLite the same one.
    b = isPostgres(ds) ? await storesModule(db, [RunsRepository]) : a;
  });

  afterAll(async () => {
    if (b !== a) {
      await b?.close();
    }
    await a?.close();
    await db?.dispose();
  });

  beforeEach(async () => {
    await a.get(HotStore).drain();
    for (const entity of ENTITIES) {
      await ds.getRepository(entity).clear();
    }
  });

  it('two processes admitting at once never exceed it; other workspaces are not counted', async () => {
    const [ra, rb] = [a.get(RunsRepository), b.get(RunsRepository)];
    // Another workspace's running run, not counted.
    expect(started(await ra.admit(startRows('ws-b', 5)))).toBe(true);
    for (let round = 0; round < 3; round++) {
      const outcomes = await Promise.all(
        Array.from({ length: 12 }, (_, i) => (i % 2 ? rb : ra).admit(startRows('ws-a', 3))),
      );
      expect(outcomes.filter(started)).toHaveLength(round === 0 ? 3 : 0);
      expect(outcomes.filter(refused)).toHaveLength(round === 0 ? 9 : 12);
      expect(await ds.getRepository(RunEntity).countBy({ workspace_id: 'ws-a', status: 'running' })).toBe(3);
    }
    // A refused admission wrote nothing: only the started runs' events exist.
    expect(await ds.getRepository(RunEntity).countBy({ workspace_id: 'ws-a' })).toBe(3);
    // One ends: exactly one more is admitted.
    const one = await ds.getRepository(RunEntity).findOneByOrFail({ workspace_id: 'ws-a', status: 'running' });
    await ds.getRepository(RunEntity).update({ run_id: one.run_id }, { status: 'completed', finished_at: T0 + 1 });
    const next = await Promise.all(Array.from({ length: 6 }, (_, i) => (i % 2 ? rb : ra).admit(startRows('ws-a', 3))));
    expect(next.filter(started)).toHaveLength(1);
    expect((await a.get(WorkspacesRepository).usage('ws-a', 0)).active_runs).toBe(3);
  });

  it('the default workspace counts runs stored without a workspace; a duplicate is answered, never refused', async () => {
    const ra = a.get(RunsRepository);
    const first = startRows(null, 1);
    expect(started(await ra.admit(first))).toBe(true);
    expect(refused(await ra.admit(startRows(null, 1)))).toBe(true);
    expect(refused(await ra.admit(startRows('default', 1)))).toBe(true);
    const dup = await ra.admit({ ...startRows(null, 1), event: first.event });
    expect(dup).toMatchObject({ admitted: false, existing: { event_id: first.event.event_id } });
    expect((await a.get(WorkspacesRepository).usage('default', 0)).active_runs).toBe(1);
  });
});
