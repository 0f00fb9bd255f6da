import * as path from 'node:path';
import { HostApi, type HostApiMethod } from '../dispatch/raw-runner/host-api';
import { measureCalls, type MeasuredCalls } from '../../apps/demo-runner/src/host-api-bench';
import { readPort } from '../common/port-handshake';
import { Child } from '../common/proc';
import { cpuDelta, cpuSnapshot, type CpuWindow } from './cpu';

/*
 * The floors, measured in the same bench run: unary calls from this process to a bare grpc-js
 * HostApiService server in a child process (bare-host-api-server.ts), with the demo runner's
 * client (HostApi: same proto, loader and channel options, a fresh metadata with the bearer token
 * per call) and the demo runner's closed loop (measureCalls), so only the server side differs
 * from the host API figures.
 */

export interface FloorCase {
  label: string;
  method: HostApiMethod;
  request: Record<string, unknown>;
}

export interface FloorResult extends MeasuredCalls {
  label: string;
  concurrency: number;
  /** CPU of the bare server process per call (/proc), µs. */
  server_cpu_us_per_call: number;
  /** CPU over the measured calls: `server`, this process (the client) and every other process. */
  cpu: CpuWindow;
}

/** Every case at every concurrency: `warmup` calls, then `calls` measured calls. */
export async function measureFloors(
  cases: FloorCase[],
  concurrencies: number[],
  calls: number,
  warmup: number,
  canned: unknown,
): Promise<FloorResult[]> {
  const server = new Child(
    'bare-host-api-server',
    path.join(__dirname, 'bare-host-api-server.js'),
    { ...process.env, BENCH_CANNED: JSON.stringify(canned) },
    ['pipe', 'pipe', 'inherit'],
  );
  const host = new HostApi(`127.0.0.1:${await readPort(server, 10_000)}`, 'bench-floor-token');
  const results: FloorResult[] = [];
  try {
    // JIT warm-up of every path first, so the first case measured is not the one that pays for it.
    for (const c of cases) {
      for (const concurrency of concurrencies) {
        await measureCalls(() => host.call(c.method, c.request as never), warmup, concurrency);
      }
    }
    for (const c of cases) {
      const call = () => host.call(c.method, c.request as never);
      for (const concurrency of concurrencies) {
        await measureCalls(call, warmup, concurrency);
        const before = cpuSnapshot({ server: server.pid });
        const measured = await measureCalls(call, calls, concurrency);
        const cpu = cpuDelta(before, cpuSnapshot({ server: server.pid }));
        results.push({
          label: c.label,
          concurrency,
          ...measured,
          server_cpu_us_per_call: (cpu.procs.server * 1000) / calls,
          cpu,
        });
      }
    }
    return results;
  } finally {
    host.close();
    await server.stop();
  }
}
