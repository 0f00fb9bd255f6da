import { DomainError } from '@libs/protocol';
import { BusyBackoff, DatabaseBusyError, busyRetryOf, isSqliteBusy, retryWhileBusy, BUSY_RETRY } from './busy-retry';

const busy = (code = 'SQLITE_BUSY') => Object.assign(new Error('database is locked'), { code });
/** TypeORM's QueryFailedError keeps the driver's error as driverError (and copies its code). */
const wrapped = (code = 'SQLITE_BUSY') => Object.assign(new Error('QueryFailedError'), { driverError: busy(code) });

describe('isSqliteBusy', () => {
  it('is true for SQLITE_BUSY and its extended codes, raw or wrapped by TypeORM', () => {
    expect(isSqliteBusy(busy())).toBe(true);
    expect(isSqliteBusy(busy('SQLITE_BUSY_SNAPSHOT'))).toBe(true);
    expect(isSqliteBusy(wrapped())).toBe(true);
    expect(isSqliteBusy(wrapped('SQLITE_BUSY_RECOVERY'))).toBe(true);
  });

  it('is false for anything else', () => {
    expect(isSqliteBusy(busy('SQLITE_CONSTRAINT_UNIQUE'))).toBe(false);
    expect(isSqliteBusy(busy('SQLITE_LOCKED'))).toBe(false);
    expect(isSqliteBusy(new Error('x'))).toBe(false);
    expect(isSqliteBusy(null)).toBe(false);
    expect(isSqliteBusy('SQLITE_BUSY')).toBe(false);
  });
});

describe('BusyBackoff', () => {
  let now = 0;
  beforeEach(() => {
    now = 1_000;
    jest.spyOn(Date, 'now').mockImplementation(() => now);
  });
  afterEach(() => jest.restoreAllMocks());

  it('waits firstDelayMs, doubling to maxDelayMs, never past the bound, then answers null', () => {
    const b = new BusyBackoff({ firstDelayMs: 2, maxDelayMs: 10, boundMs: 30 });
    const waits: number[] = [];
    for (let w = b.next(); w !== null; w = b.next()) {
      waits.push(w);
      now += w;
    }
    expect(waits).toEqual([2, 4, 8, 10, 6]); // 2+4+8+10 = 24; the last wait ends at the bound
    expect(now - 1_000).toBe(30);
    const e = b.failure('database is locked');
    expect(e).toBeInstanceOf(DatabaseBusyError);
    expect(e.toProtocol()).toMatchObject({
      code: 'unavailable',
      retryable: true,
      details: { reason: 'database.busy', waited_ms: 30 },
    });
    expect(e.message).toMatch(
      /stayed locked by another connection for 30 ms \(database is locked\); nothing was written/,
    );
  });

  it('counts from the given start (the first attempt), not from its own creation', () => {
    now = 1_025;
    expect(new BusyBackoff({ firstDelayMs: 2, maxDelayMs: 10, boundMs: 30 }, 1_000).next()).toBe(2);
    now = 1_030;
    expect(new BusyBackoff({ firstDelayMs: 2, maxDelayMs: 10, boundMs: 30 }, 1_000).next()).toBeNull();
  });
});

describe('busyRetryOf', () => {
  it('keeps the default policy, or sets only its bound', () => {
    expect(busyRetryOf(undefined)).toBe(BUSY_RETRY);
    expect(busyRetryOf(0)).toEqual({ ...BUSY_RETRY, boundMs: 0 });
  });
});

describe('retryWhileBusy', () => {
  const policy = { firstDelayMs: 1, maxDelayMs: 2, boundMs: 5_000 };

  it('runs the attempt again while it fails busy, and answers its first success', async () => {
    let calls = 0;
    const r = await retryWhileBusy(() => {
      calls++;
      return calls < 4 ? Promise.reject(wrapped()) : Promise.resolve('ok');
    }, policy);
    expect(r).toBe('ok');
    expect(calls).toBe(4);
  });

  it('does not retry another error', async () => {
    let calls = 0;
    const other = busy('SQLITE_CONSTRAINT_UNIQUE');
    await expect(
      retryWhileBusy(() => {
        calls++;
        return Promise.reject(other);
      }, policy),
    ).rejects.toBe(other);
    expect(calls).toBe(1);
  });

  it('gives up with DatabaseBusyError naming the driver message once the bound is spent', async () => {
    let calls = 0;
    const e = await retryWhileBusy(
      () => {
        calls++;
        return Promise.reject(wrapped());
      },
      { firstDelayMs: 1, maxDelayMs: 1, boundMs: 0 },
    ).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(DatabaseBusyError);
    expect((e as DomainError).message).toContain('(database is locked)');
    expect(calls).toBe(1);
  });
});
