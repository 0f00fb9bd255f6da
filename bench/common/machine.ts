import * as fs from 'node:fs';
import { clockTicks } from './proc';

/*
 * What the machine (not the processes a bench starts) did during a measured window, read from
 * Linux /proc: the CPU of a local database server's processes (all processes of one command name,
 * e.g. `postgres`) and the disks' flushes and writes. A bench subtracts the server's CPU from "other
 * processes" so that figure is the neighbours' load alone, and gives the disk flushes per run beside
 * the server's WAL flushes: the time a PostgreSQL commit waits for its WAL flush is set by the disk's
 * flush time, which `pg_stat_wal` gives only with `track_wal_io_timing` on (docs/benchmarks.md,
 * "PostgreSQL c1 in the targets run and alone (round 16, wt-pgctx16)").
 */

/**
 * CPU time (ms) of every process whose command name (`/proc/PID/comm`) is `comm`, children already
 * reaped included (`cutime`/`cstime`: a PostgreSQL backend that exits during a window moves its CPU
 * into the postmaster's), so the sum only grows. NaN when no such process is visible (not Linux, or
 * the server runs on another machine).
 */
export function commandCpuMs(comm: string): number {
  let pids: string[];
  try {
    pids = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return NaN;
  }
  let ticks = 0;
  let seen = 0;
  for (const pid of pids) {
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    const t = statTicksOf(stat, comm);
    if (t !== null) {
      ticks += t;
      seen++;
    }
  }
  return seen === 0 ? NaN : (ticks * 1000) / clockTicks();
}

/** utime + stime + cutime + cstime of a `/proc/PID/stat` line whose command is `comm`; null otherwise. */
export function statTicksOf(stat: string, comm: string): number | null {
  const open = stat.indexOf('(');
  const close = stat.lastIndexOf(')');
  if (open < 0 || close < open || stat.slice(open + 1, close) !== comm) {
    return null;
  }
  // After "(comm) ": state is field 3 of proc(5), so utime..cstime (14–17) are at 11–14.
  const f = stat.slice(close + 2).split(' ');
  return Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
}

/** Flush requests completed, ms spent on them, and MiB written: summed over the machine's disks. */
export interface DiskCounters {
  flushes: number;
  flushMs: number;
  writtenMiB: number;
}

/**
 * Sums `/proc/diskstats` over the devices named in `disks` (whole disks: partitions and
 * device-mapper volumes would count the same I/O twice). Flushes are fields 16–17 of the kernel's
 * iostats (Linux 5.5+); NaN on older kernels.
 */
export function parseDiskstats(text: string, disks: ReadonlySet<string>): DiskCounters {
  const sum: DiskCounters = { flushes: 0, flushMs: 0, writtenMiB: 0 };
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 14 || !disks.has(f[2])) {
      continue;
    }
    // f[3] is field 1 (reads completed); sectors written is field 7, flushes 16, flush ms 17.
    sum.writtenMiB += (Number(f[9]) * 512) / 1048576;
    sum.flushes += f.length >= 20 ? Number(f[18]) : NaN;
    sum.flushMs += f.length >= 20 ? Number(f[19]) : NaN;
  }
  return sum;
}

let wholeDisks: Set<string> | undefined;

/** Block devices backed by a device (`/sys/block/NAME/device`): not loop, ram or dm volumes. */
function disks(): Set<string> {
  if (wholeDisks === undefined) {
    try {
      wholeDisks = new Set(fs.readdirSync('/sys/block').filter((d) => fs.existsSync(`/sys/block/${d}/device`)));
    } catch {
      wholeDisks = new Set();
    }
  }
  return wholeDisks;
}

/** The disks' counters now; null when not readable (not Linux). */
export function diskCounters(): DiskCounters | null {
  try {
    return parseDiskstats(fs.readFileSync('/proc/diskstats', 'utf8'), disks());
  } catch {
    return null;
  }
}

/** What the disks did between two readings; null when either is missing. */
export function diskDelta(a: DiskCounters | null, b: DiskCounters | null): DiskCounters | null {
  if (!a || !b) {
    return null;
  }
  return { flushes: b.flushes - a.flushes, flushMs: b.flushMs - a.flushMs, writtenMiB: b.writtenMiB - a.writtenMiB };
}
