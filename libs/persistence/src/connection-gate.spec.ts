import { DomainError } from '@libs/protocol';
import { DatabaseBusyError } from './busy-retry';
import { ConnectionGate } from './connection-gate';

const FAR = () => Date.now() + 60_000;

/** Lets queued promise callbacks run. */
const turn = () => new Promise((r) => setImmediate(r));

describe('ConnectionGate (one owner of the SQLite connection, docs/durability.md#a-busy-writer-lock)', () => {
  it('a free gate is taken at once; its holder holds it, nobody else does', async () => {
    const gate = new ConnectionGate();
    const a = {};
    await gate.acquire(a, FAR());
    expect(gate.holds(a)).toBe(true);
    expect(gate.holds({})).toBe(false);
    gate.release(a);
    expect(gate.holds(a)).toBe(false);
  });

  it('others wait while it is held and get it in arrival order, one at a time', async () => {
    const gate = new ConnectionGate();
    const [a, b, c] = [{}, {}, {}];
    const order: string[] = [];
    await gate.acquire(a, FAR());
    const gotB = gate.acquire(b, FAR()).then(() => order.push('b'));
    const gotC = gate.acquire(c, FAR()).then(() => order.push('c'));
    await turn();
    expect(order).toEqual([]);
    expect(gate.waiters).toBe(2);
    gate.release(a);
    await gotB;
    await turn();
    expect(order).toEqual(['b']); // c still waits: b holds it
    expect(gate.holds(b)).toBe(true);
    gate.release(b);
    await gotC;
    expect(order).toEqual(['b', 'c']);
    expect(gate.holds(c)).toBe(true);
  });

  it('a freed gate goes to the first waiter, not to a caller arriving in between', async () => {
    const gate = new ConnectionGate();
    const [a, b, late] = [{}, {}, {}];
    await gate.acquire(a, FAR());
    const gotB = gate.acquire(b, FAR());
    gate.release(a);
    const gotLate = gate.acquire(late, FAR());
    await gotB;
    expect(gate.holds(b)).toBe(true);
    expect(gate.holds(late)).toBe(false);
    gate.release(b);
    await gotLate;
    expect(gate.holds(late)).toBe(true);
  });

  it('release by a caller that does not hold it changes nothing', async () => {
    const gate = new ConnectionGate();
    const [a, b] = [{}, {}];
    await gate.acquire(a, FAR());
    const gotB = gate.acquire(b, FAR());
    gate.release(b); // a waiter, not the holder
    gate.release({});
    expect(gate.holds(a)).toBe(true);
    expect(gate.waiters).toBe(1);
    gate.release(a);
    await gotB;
    expect(gate.holds(b)).toBe(true);
  });

  it('a waiter not served by its deadline fails 503 database.busy and leaves the queue; the others keep their places', async () => {
    const gate = new ConnectionGate();
    const [a, late, patient] = [{}, {}, {}];
    await gate.acquire(a, FAR());
    const timedOut = gate.acquire(late, Date.now()).catch((e: unknown) => e);
    const gotPatient = gate.acquire(patient, FAR());
    const e = await timedOut;
    expect(e).toBeInstanceOf(DatabaseBusyError);
    expect((e as DomainError).toProtocol()).toMatchObject({
      code: 'unavailable',
      retryable: true,
      details: { reason: 'database.busy' },
    });
    expect((e as Error).message).toMatch(/locked by the host's SQLite connection .*nothing was written, retry/);
    expect(gate.waiters).toBe(1);
    gate.release(a);
    await gotPatient;
    expect(gate.holds(patient)).toBe(true);
    expect(gate.holds(late)).toBe(false);
  });

  it('a past deadline does not matter when the gate is free', async () => {
    const gate = new ConnectionGate();
    const a = {};
    await gate.acquire(a, Date.now() - 1000);
    expect(gate.holds(a)).toBe(true);
  });

  it('the holder asking again is refused (it would wait for itself)', async () => {
    const gate = new ConnectionGate();
    const a = {};
    await gate.acquire(a, FAR());
    await expect(gate.acquire(a, FAR())).rejects.toThrow(/already holds/);
    expect(gate.holds(a)).toBe(true);
    expect(gate.waiters).toBe(0);
  });
});
