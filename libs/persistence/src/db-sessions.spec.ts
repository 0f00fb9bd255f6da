import { DbSessions, sessionName } from './db-sessions';

describe('DbSessions', () => {
  it('names a session by process id and role, within the 63 bytes PostgreSQL keeps', () => {
    const id = '0b7f6c9e-3d1a-4c55-9a7e-1f2e3d4c5b6a';
    expect(sessionName(id, 'writer')).toBe(`runner-host ${id} writer`);
    for (const role of ['writer', 'reader', 'pool', 'bus'] as const) {
      expect(Buffer.byteLength(sessionName(id, role))).toBeLessThanOrEqual(63);
    }
  });

  it('gives new connections the current name and the idle-in-transaction timeout (none for the bus)', () => {
    const sessions = new DbSessions('p1', 2000);
    expect(sessions.options('pool')).toEqual({
      application_name: 'runner-host p1 pool',
      idle_in_transaction_session_timeout: 2000,
    });
    expect(sessions.options('bus')).toEqual({ application_name: 'runner-host p1 bus' });
    expect(new DbSessions('p1').options('writer')).toEqual({ application_name: 'runner-host p1 writer' });
    sessions.rename('p2');
    expect(sessions.processId).toBe('p2');
    expect(sessions.options('writer').application_name).toBe('runner-host p2 writer');
  });

  it('renames a connection made under an older id once, before its next query', () => {
    const sessions = new DbSessions('p1');
    const queries: unknown[][] = [];
    const client = {
      connectionParameters: { application_name: 'runner-host p1 writer' },
      query: (...args: unknown[]) => {
        queries.push(args);
        return Promise.resolve();
      },
    };
    const asClient = client as unknown as Parameters<DbSessions['ensureNamed']>[0];
    sessions.ensureNamed(asClient, 'writer');
    expect(queries).toEqual([]);
    sessions.rename('p2');
    sessions.ensureNamed(asClient, 'writer');
    sessions.ensureNamed(asClient, 'writer');
    expect(queries).toEqual([[`SELECT set_config('application_name', $1, false)`, ['runner-host p2 writer']]]);
  });
});
