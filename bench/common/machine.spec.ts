import { diskDelta, parseDiskstats, statTicksOf } from './machine';

describe('statTicksOf', () => {
  // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime …
  const stat = (comm: string) => `2297 (${comm}) S 1 2297 2297 0 -1 4194368 120 5 0 0 30 12 400 60 20 0 1 0 466`;

  it('adds utime, stime and the reaped children’s cutime and cstime of the named command', () => {
    expect(statTicksOf(stat('postgres'), 'postgres')).toBe(30 + 12 + 400 + 60);
  });

  it('skips other commands, also ones the name is a part of', () => {
    expect(statTicksOf(stat('node'), 'postgres')).toBeNull();
    expect(statTicksOf(stat('postgres2'), 'postgres')).toBeNull();
  });

  it('reads a command name with spaces and parentheses up to its last parenthesis', () => {
    expect(statTicksOf(stat('a (b) c'), 'a (b) c')).toBe(502);
  });
});

describe('parseDiskstats', () => {
  // major minor name, then 17 fields: reads 1–4, writes 5–8 (sectors written 7), in flight, io ms,
  // weighted, discards 12–15, flushes 16, flush ms 17.
  const text = [
    ' 254       0 vda 72786 15801 2853458 15251 43045 116023 2048 59303 0 20584 82881 9706 67 7296376 2444 7613 5881',
    ' 254       1 vda1 100 0 800 10 40 0 1024 5 0 5 5 0 0 0 0 0 0',
    '   7       0 loop0 5 0 40 1 0 0 0 0 0 1 1 0 0 0 0 0 0',
    ' 253       0 sdb 1 0 8 1 10 0 4096 20 0 5 5 0 0 0 0 387 13',
  ].join('\n');

  it('sums the named whole disks: flushes, flush ms and MiB written', () => {
    expect(parseDiskstats(text, new Set(['vda', 'sdb']))).toEqual({
      flushes: 7613 + 387,
      flushMs: 5881 + 13,
      writtenMiB: ((2048 + 4096) * 512) / 1048576,
    });
  });

  it('ignores partitions and devices not named', () => {
    expect(parseDiskstats(text, new Set(['vda']))).toEqual({ flushes: 7613, flushMs: 5881, writtenMiB: 1 });
  });

  it('gives NaN flushes on a kernel whose lines stop before the flush fields', () => {
    const old = ' 8 0 sda 1 0 8 1 10 0 2048 20 0 5 5 0 0 0 0';
    const d = parseDiskstats(old, new Set(['sda']));
    expect(d.flushes).toBeNaN();
    expect(d.flushMs).toBeNaN();
    expect(d.writtenMiB).toBe(1);
  });
});

describe('diskDelta', () => {
  it('subtracts the earlier reading, null when either is missing', () => {
    const a = { flushes: 10, flushMs: 2, writtenMiB: 1 };
    const b = { flushes: 25, flushMs: 5, writtenMiB: 4 };
    expect(diskDelta(a, b)).toEqual({ flushes: 15, flushMs: 3, writtenMiB: 3 });
    expect(diskDelta(null, b)).toBeNull();
    expect(diskDelta(a, null)).toBeNull();
  });
});
