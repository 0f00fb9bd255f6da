import { execFileSync, spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import * as fs from 'node:fs';

/*
 * Child processes of the bench, and what /proc says about them. Every child is registered so it
 * is killed however the bench ends: normal exit, thrown error, Ctrl-C or SIGTERM.
 */

const alive = new Set<ChildProcess>();
let hooked = false;

function installExitHooks(): void {
  if (hooked) {
    return;
  }
  hooked = true;
  process.on('exit', () => {
    for (const c of alive) {
      c.kill('SIGKILL');
    }
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      process.stderr.write(`\nbench: ${signal}, killing children\n`);
      process.exit(signal === 'SIGINT' ? 130 : 143);
    });
  }
}

export class Child {
  readonly proc: ChildProcess;
  readonly exited: Promise<void>;
  exitStatus: string | null = null;

  constructor(
    readonly name: string,
    script: string,
    env: NodeJS.ProcessEnv,
    stdio: StdioOptions,
    nodeArgs: string[] = [],
  ) {
    installExitHooks();
    this.proc = spawn(process.execPath, [...nodeArgs, script], { env, stdio });
    alive.add(this.proc);
    this.exited = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => {
        alive.delete(this.proc);
        this.exitStatus = signal ? `signal ${signal}` : `code ${String(code)}`;
        resolve();
      });
    });
    this.proc.once('error', (e) => {
      process.stderr.write(`bench: ${name}: ${e.message}\n`);
    });
  }

  get pid(): number {
    return this.proc.pid ?? -1;
  }

  get running(): boolean {
    return this.exitStatus === null;
  }

  /** SIGTERM, then SIGKILL after `graceMs`. */
  async stop(graceMs = 3000): Promise<void> {
    if (!this.running) {
      return;
    }
    this.proc.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.proc.kill('SIGKILL');
        resolve();
      }, graceMs);
    });
    await Promise.race([this.exited, timeout]);
    clearTimeout(timer);
    await this.exited;
  }
}

let ticksPerSecond: number | undefined;

/** Clock ticks per second of /proc's CPU times (`getconf CLK_TCK`, 100 if unknown). */
export function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** User + system CPU time of a process so far, in ms (Linux /proc; NaN elsewhere). */
export function cpuMs(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After "(comm) ": state is field 3 of proc(5), so utime (14) and stime (15) are at 11 and 12.
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicks();
  } catch {
    return NaN;
  }
}

/** Resident set size of a process in MiB (Linux /proc; NaN elsewhere). */
export function rssMiB(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** CPU time of this process so far, in ms. */
export function selfCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** Busy CPU time of the whole machine so far, in ms summed over cores (Linux /proc/stat; NaN elsewhere). */
export function machineBusyMs(): number {
  try {
    const first = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0];
    const [user, nice, system, , , irq, softirq, steal] = first.trim().split(/\s+/).slice(1).map(Number);
    return ((user + nice + system + irq + softirq + steal) * 1000) / clockTicks();
  } catch {
    return NaN;
  }
}
