import { performance } from 'node:perf_hooks';
import { cpuMs, machineBusyMs, selfCpuMs } from '../common/proc';

/** CPU time so far (ms) of the processes of one measurement, this process and the whole machine. */
export interface CpuSnapshot {
  at: number;
  pids: Record<string, number>;
  procs: Record<string, number>;
  self: number;
  machine: number;
}

/** CPU spent over a window (ms): per process, this process, and by every other process of the machine. */
export interface CpuWindow {
  elapsedMs: number;
  procs: Record<string, number>;
  self: number;
  other: number;
}

export function cpuSnapshot(pids: Record<string, number>): CpuSnapshot {
  const procs: Record<string, number> = {};
  for (const [name, pid] of Object.entries(pids)) {
    procs[name] = cpuMs(pid);
  }
  return { at: performance.now(), pids, procs, self: selfCpuMs(), machine: machineBusyMs() };
}

export function cpuDelta(a: CpuSnapshot, b: CpuSnapshot): CpuWindow {
  const procs: Record<string, number> = {};
  for (const name of Object.keys(a.procs)) {
    procs[name] = b.procs[name] - a.procs[name];
  }
  const self = b.self - a.self;
  const ours = self + Object.values(procs).reduce((x, y) => x + y, 0);
  return { elapsedMs: b.at - a.at, procs, self, other: Math.max(0, b.machine - a.machine - ours) };
}
