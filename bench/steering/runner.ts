import * as grpc from '@grpc/grpc-js';
import { HostApi } from '../dispatch/raw-runner/host-api';
import { createGatewayClient, type ConnectCall, type HostMessage } from '../dispatch/raw-runner/proto';
import { fromStruct, toStruct, type JsonObject } from '../dispatch/raw-runner/struct';

/*
 * The bench's runner, in the bench process so that the moment a steering item reaches the runner
 * is measured on the same clock as the POST that sent it. It speaks the Runner Protocol over the
 * real gRPC stream (hello/welcome/run/result) and pulls with a waiting SteeringPull (wait_ms).
 * Runs whose input starts with one of `pullPrefixes` keep pulling — until `finishAll()`, until
 * they pulled `endAfter` items (then they complete, and what is still queued on them is the
 * host's to re-dispatch), or, once `draining`, until a pull comes back empty; others complete at once.
 */

export const BENCH_RUNNER_ID = 'plugin:bench/steer/default';

export interface Arrival {
  run_id: string;
  /** `steered` (pulled by a running run) or `run` (started as a run of its own). */
  via: 'steered' | 'run';
  text: string;
  at: number;
}

export class BenchRunner {
  readonly arrivals: Arrival[] = [];
  /** Called for every arrival, at once (latency probes). */
  onArrival: (a: Arrival) => void = () => undefined;
  private readonly client;
  private readonly hostApi: HostApi;
  private call!: ConnectCall;
  private readonly pulling = new Set<string>();
  private finishing = false;
  pullPrefixes = ['pull:'];
  /** A pulling run completes after this many items (Infinity: never on its own). */
  endAfter = Number.POSITIVE_INFINITY;
  /** Runs complete on an empty pull, and new runs at once. */
  draining = false;
  private pulls = 0;
  private pending = new Set<Promise<void>>();

  constructor(
    url: string,
    private readonly token: string,
    public waitMs: number,
  ) {
    this.client = createGatewayClient(url);
    this.hostApi = new HostApi(url, token);
  }

  get pullCalls(): number {
    return this.pulls;
  }

  connect(): Promise<void> {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${this.token}`);
    this.call = this.client.Connect(md);
    this.call.on('error', () => undefined);
    const welcomed = new Promise<void>((resolve, reject) => {
      this.call.on('data', (m: HostMessage) => {
        if (m.msg === 'welcome') {
          if (m.welcome.rejected.length > 0) {
            reject(new Error(`manifest rejected: ${JSON.stringify(m.welcome.rejected)}`));
          }
          resolve();
        } else if (m.msg === 'ping') {
          this.call.write({ pong: { nonce: m.ping.nonce } });
        } else if (m.msg === 'run' && m.run.context?.run_id) {
          this.onRun(m.run.context.run_id, m.run.context.input?.text ?? '');
        }
      });
    });
    this.call.write({
      hello: {
        plugin_author: 'bench',
        plugin_name: 'steer',
        plugin_version: '0.1.0',
        protocol_version: '1',
        manifests: [
          toStruct({
            id: BENCH_RUNNER_ID,
            name: 'default',
            label: { en_US: 'Steering bench' },
            description: { en_US: 'Pulls steering items with a waiting SteeringPull' },
            protocol_version: '1',
            capabilities: { streaming: true, steering: true },
            permissions: {},
            config_schema: [],
            metadata: {},
          }),
        ],
      },
    });
    return welcomed;
  }

  /** Every pulling run completes (its waiting pull is answered empty by the host as the run ends). */
  async finishAll(): Promise<void> {
    this.finishing = true;
    for (const runId of [...this.pulling]) {
      this.complete(runId);
    }
    await Promise.allSettled([...this.pending]);
    this.finishing = false;
  }

  close(): void {
    this.call.end();
    this.hostApi.close();
    this.client.close();
  }

  private onRun(runId: string, text: string): void {
    this.record({ run_id: runId, via: 'run', text, at: performance.now() });
    if (!this.pullPrefixes.some((p) => text.startsWith(p)) || this.finishing || this.draining) {
      this.complete(runId);
      return;
    }
    this.pulling.add(runId);
    const loop = this.pullLoop(runId).finally(() => this.pending.delete(loop));
    this.pending.add(loop);
  }

  private async pullLoop(runId: string): Promise<void> {
    let pulled = 0;
    while (this.pulling.has(runId)) {
      this.pulls++;
      const res = await this.hostApi
        .call('SteeringPull', { run_id: runId, mode: 'all', wait_ms: this.waitMs })
        .catch(() => ({ items: [] }));
      const at = performance.now();
      for (const item of res.items.map(fromStruct)) {
        const text = (item.input as JsonObject | undefined)?.text;
        this.record({ run_id: runId, via: 'steered', text: typeof text === 'string' ? text : '', at });
      }
      pulled += res.items.length;
      if (this.pulling.has(runId) && (pulled >= this.endAfter || (this.draining && res.items.length === 0))) {
        this.complete(runId);
      }
    }
  }

  private record(a: Arrival): void {
    this.arrivals.push(a);
    this.onArrival(a);
  }

  private complete(runId: string): void {
    this.pulling.delete(runId);
    this.call.write({
      result: {
        run_id: runId,
        type: 'run.completed',
        data: toStruct({ finish_reason: 'stop' }),
        sequence: 1,
        timestamp: Math.floor(Date.now() / 1000),
      },
    });
  }
}
