import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import * as grpc from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import { createGatewayClient, type PluginMessage } from './gateway-proto';
import { readPort } from '../common/port-handshake';
import { Child, cpuMs, selfCpuMs } from '../common/proc';
import { summarize, type Summary } from '../common/stats';

/*
 * The floors under the host's dispatch path, measured in the same run on the same machine:
 * (a) one round trip on an already-open grpc-js bidi stream between two processes, and
 * (b) one durable SQLite write (one-row insert per transaction, the host's pragmas).
 */

export interface FloorResult {
  latency: Summary;
  /** Operations per second (closed loop, one at a time). */
  rate: number;
  /** CPU per operation in ms, this process and the server process (NaN when not applicable). */
  cpuClientMs: number;
  cpuServerMs: number;
}

/**
 * The measured loop of an in-process floor, one operation at a time: lap() after each operation
 * records its time; result() gives the latency, the rate and this process's CPU per operation.
 */
export class Laps {
  private readonly samples: number[] = [];
  private readonly cpu0 = selfCpuMs();
  private readonly start = performance.now();
  private now = this.start;

  constructor(private readonly durationMs: number) {}

  running(): boolean {
    return this.now < this.start + this.durationMs;
  }

  lap(): void {
    const t = performance.now();
    this.samples.push(t - this.now);
    this.now = t;
  }

  result(): FloorResult {
    return {
      latency: summarize(this.samples),
      rate: (this.samples.length * 1000) / (this.now - this.start),
      cpuClientMs: (selfCpuMs() - this.cpu0) / this.samples.length,
      cpuServerMs: NaN,
    };
  }
}

/** Ping-pong of a small message on one open Connect stream to a bare grpc-js server in a child process. */
export async function bidiFloor(warmupMs: number, durationMs: number): Promise<FloorResult> {
  const server = new Child('bare-grpc-server', path.join(__dirname, 'bare-grpc-server.js'), process.env, [
    'pipe',
    'pipe',
    'inherit',
  ]);
  const client = createGatewayClient(`127.0.0.1:${await readPort(server, 10_000)}`);
  try {
    const call = client.Connect(new grpc.Metadata());
    const message: PluginMessage = { heartbeat: { active_run_ids: ['00000000-0000-4000-8000-000000000000'] } };
    const samples: number[] = [];
    let cpu0 = { client: 0, server: 0 };
    const window = { start: 0, end: 0 };
    await new Promise<void>((resolve, reject) => {
      const warmupEnd = performance.now() + warmupMs;
      let sentAt = 0;
      let measuring = false;
      const send = (): void => {
        sentAt = performance.now();
        call.write(message);
      };
      call.on('data', () => {
        const now = performance.now();
        if (measuring) {
          samples.push(now - sentAt);
          if (now >= window.start + durationMs) {
            window.end = now;
            resolve();
            return;
          }
        } else if (now >= warmupEnd) {
          measuring = true;
          window.start = now;
          cpu0 = { client: selfCpuMs(), server: cpuMs(server.pid) };
        }
        send();
      });
      call.on('error', reject);
      send();
    });
    const cpu = { client: selfCpuMs() - cpu0.client, server: cpuMs(server.pid) - cpu0.server };
    call.end();
    return {
      latency: summarize(samples),
      rate: (samples.length * 1000) / (window.end - window.start),
      cpuClientMs: cpu.client / samples.length,
      cpuServerMs: cpu.server / samples.length,
    };
  } finally {
    client.close();
    await server.stop();
  }
}

/** One-row insert per transaction into a fresh SQLite file: WAL, synchronous=NORMAL (as the host). */
export function sqliteFloor(warmupMs: number, durationMs: number): FloorResult {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-sqlite-'));
  const db = new Database(path.join(dir, 'floor.sqlite'));
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('busy_timeout = 5000');
    db.exec(
      'CREATE TABLE results (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, sequence INTEGER NOT NULL, ' +
        'type TEXT NOT NULL, data TEXT NOT NULL, created_at TEXT NOT NULL)',
    );
    const stmt = db.prepare('INSERT INTO results (run_id, sequence, type, data, created_at) VALUES (?, ?, ?, ?, ?)');
    const insert = db.transaction((i: number) => {
      stmt.run(
        '0b7e1c1e-6a35-4d3b-9a53-5f0e0c1f2a3b',
        i,
        'message.delta',
        '{"text":" bench"}',
        new Date().toISOString(),
      );
    });
    let i = 0;
    const warmupEnd = performance.now() + warmupMs;
    while (performance.now() < warmupEnd) {
      insert(i++);
    }
    const laps = new Laps(durationMs);
    while (laps.running()) {
      insert(i++);
      laps.lap();
    }
    return laps.result();
  } finally {
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
