import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { PluginRefusedError, RunAbortedError } from './errors';
import { fromStruct, toStruct, type JsonObject } from './json';
import { backoffDelay, RunnerPlugin } from './plugin';
import { defineRunner } from './runner';
import { loadServices, type WirePluginMessage, type WireRunResult } from './wire';

/*
 * The connection over real gRPC on loopback, against a gateway driven by the test (the
 * service from the same .proto): hello with manifests and the token, welcome, ping/pong,
 * heartbeats with the active runs, results batched per tick, cancel, refusal, reconnect.
 */

class Inbox<T> {
  private items: T[] = [];
  private waiters: ((item: T) => void)[] = [];
  push(item: T): void {
    const w = this.waiters.shift();
    if (w) {
      w(item);
    } else {
      this.items.push(item);
    }
  }
  next(): Promise<T> {
    const item = this.items.shift();
    return item !== undefined ? Promise.resolve(item) : new Promise((resolve) => this.waiters.push(resolve));
  }
}

type HostCall = grpc.ServerDuplexStream<WirePluginMessage, object>;
interface Frame {
  kind: 'result' | 'results';
  results: (Omit<WireRunResult, 'data' | 'usage'> & { data: JsonObject })[];
}

class Gateway {
  readonly server = new grpc.Server();
  readonly calls = new Inbox<{ call: HostCall; token: string }>();
  readonly hellos = new Inbox<NonNullable<WirePluginMessage['hello']>>();
  readonly frames = new Inbox<Frame>();
  readonly pongs = new Inbox<number>();
  readonly heartbeats = new Inbox<string[]>();
  port = 0;

  async start(port = 0): Promise<this> {
    this.server.addService(loadServices().RunnerGatewayService.service, {
      Connect: (call: HostCall) => {
        call.on('data', (m: WirePluginMessage) => {
          const decode = (r: WireRunResult) => ({ ...r, data: fromStruct(r.data), usage: undefined });
          if (m.hello) {
            this.hellos.push(m.hello);
          } else if (m.result) {
            this.frames.push({ kind: 'result', results: [decode(m.result)] });
          } else if (m.results) {
            this.frames.push({ kind: 'results', results: m.results.results.map(decode) });
          } else if (m.pong) {
            this.pongs.push(m.pong.nonce);
          } else if (m.heartbeat) {
            this.heartbeats.push(m.heartbeat.active_run_ids);
          }
        });
        call.on('error', () => undefined);
        call.on('end', () => call.end());
        this.calls.push({ call, token: String(call.metadata.get('authorization')[0]) });
      },
    });
    this.port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
    return this;
  }

  welcome(call: HostCall, heartbeatMs = 0): void {
    call.write({
      welcome: {
        session_id: 's',
        host_version: 'test',
        protocol_version: '1',
        runners: [{ runner_id: 'plugin:acme/bot/default', name: 'default' }],
        rejected: [],
        heartbeat_interval_ms: heartbeatMs,
      },
    });
  }

  run(call: HostCall, runId: string, text: string): void {
    call.write({
      run: {
        runner_id: 'plugin:acme/bot/default',
        runner_name: 'default',
        context: { run_id: runId, input: { text }, config: toStruct({}) },
      },
    });
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server.tryShutdown(() => resolve()));
  }
}

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

describe('RunnerPlugin over gRPC (loopback gateway)', () => {
  const plugins: RunnerPlugin[] = [];
  const gateways: Gateway[] = [];
  afterEach(async () => {
    await Promise.all(plugins.splice(0).map((p) => p.stop(100)));
    gateways.splice(0).forEach((g) => g.server.forceShutdown());
  });

  const start = (
    port: number,
    runners = [echo()],
    extra: Partial<ConstructorParameters<typeof RunnerPlugin>[0]> = {},
  ) => {
    const plugin = new RunnerPlugin({
      url: `127.0.0.1:${port}`,
      token: 'tok-1',
      author: 'acme',
      plugin: 'bot',
      version: '1.2.3',
      runners,
      reconnect: { initialDelayMs: 10, maxDelayMs: 20 },
      log: () => undefined,
      ...extra,
    });
    plugins.push(plugin);
    return plugin;
  };

  function echo(hold?: Promise<void>, seen?: (signal: AbortSignal) => void) {
    return defineRunner({
      name: 'default',
      capabilities: { streaming: true },
      async run(ctx, io) {
        seen?.(io.signal);
        for (const word of (ctx.input?.text ?? '').split(' ')) {
          void io.delta(`${word} `);
        }
        await hold;
        await io.completed();
      },
    });
  }

  it('sends extra manifests as they are, after the runners’ own', async () => {
    const gw = await new Gateway().start();
    gateways.push(gw);
    const raw = { id: 'plugin:acme/bot/raw', name: 'raw', protocol_version: '1', unknown_key: true };
    const plugin = start(gw.port, [echo()], { extraManifests: [raw] });
    void plugin.start().catch(() => undefined);
    const hello = await gw.hellos.next();
    expect(hello.manifests.map(fromStruct).map((m) => m.id)).toEqual([
      'plugin:acme/bot/default',
      'plugin:acme/bot/raw',
    ]);
    expect(fromStruct(hello.manifests[1])).toEqual(raw);
  });

  it('says hello with the token and one manifest per runner; answers pings; heartbeats list the active runs', async () => {
    const gw = await new Gateway().start();
    gateways.push(gw);
    const hold = gate();
    const plugin = start(gw.port, [echo(hold.opened)]);
    const welcomed = plugin.start();
    const { call, token } = await gw.calls.next();
    expect(token).toBe('Bearer tok-1');
    const hello = await gw.hellos.next();
    expect({ ...hello, manifests: hello.manifests.map(fromStruct) }).toEqual({
      plugin_author: 'acme',
      plugin_name: 'bot',
      plugin_version: '1.2.3',
      protocol_version: '1',
      manifests: [
        {
          id: 'plugin:acme/bot/default',
          name: 'default',
          label: { en_US: 'default' },
          description: null,
          protocol_version: '1',
          capabilities: { streaming: true },
          permissions: {},
          config_schema: [],
          metadata: {},
        },
      ],
    });
    gw.welcome(call, 20);
    expect((await welcomed).runners).toHaveLength(1);
    call.write({ ping: { nonce: 42 } });
    expect(await gw.pongs.next()).toBe(42);

    gw.run(call, 'run-1', 'one two three');
    // The three deltas of one tick arrive as one frame.
    expect(await gw.frames.next()).toMatchObject({
      kind: 'results',
      results: [
        { run_id: 'run-1', type: 'message.delta', sequence: 1 },
        { run_id: 'run-1', type: 'message.delta', sequence: 2 },
        { run_id: 'run-1', type: 'message.delta', sequence: 3 },
      ],
    });
    let beat = await gw.heartbeats.next();
    while (beat.length === 0) {
      beat = await gw.heartbeats.next();
    }
    expect(beat).toEqual(['run-1']);
    hold.open();
    const end = await gw.frames.next();
    expect(end.results.map((r) => [r.type, r.sequence])).toEqual([
      ['message.completed', 4],
      ['run.completed', 5],
    ]);
    expect(end.results[0].data).toEqual({ message: { role: 'assistant', content: 'one two three ' } });
    // Once the run has ended, the heartbeats list no run.
    beat = await gw.heartbeats.next();
    while (beat.length > 0) {
      beat = await gw.heartbeats.next();
    }
    expect(beat).toEqual([]);
  });

  it("a cancel fires the run's signal and sends run.failed (cancelled); a run without context.run_id is ignored", async () => {
    const gw = await new Gateway().start();
    gateways.push(gw);
    let signal: AbortSignal | undefined;
    const plugin = start(gw.port, [echo(new Promise(() => undefined), (s) => (signal = s))]);
    const welcomed = plugin.start();
    const { call } = await gw.calls.next();
    gw.welcome(call);
    await welcomed;
    call.write({ run: { runner_id: 'x', runner_name: 'default', context: { input: { text: 'no id' } } } });
    gw.run(call, 'run-2', 'hello');
    await gw.frames.next();
    call.write({ cancel: { run_id: 'run-2', reason: 'stop it' } });
    const failed = await gw.frames.next();
    expect(failed.results).toEqual([
      expect.objectContaining({
        run_id: 'run-2',
        type: 'run.failed',
        sequence: 2,
        data: { error: 'cancelled: stop it', code: 'cancelled', retryable: false },
      }),
    ]);
    expect(signal?.aborted).toBe(true);
    expect(signal?.reason).toBeInstanceOf(RunAbortedError);
  });

  it('a refused token is final: start() rejects with PluginRefusedError, no reconnect', async () => {
    const gw = await new Gateway().start();
    gateways.push(gw);
    const plugin = start(gw.port);
    const welcomed = plugin.start();
    const { call } = await gw.calls.next();
    call.emit(
      'error',
      Object.assign(new Error('bad token'), { code: grpc.status.UNAUTHENTICATED, details: 'unknown plugin token' }),
    );
    await expect(welcomed).rejects.toBeInstanceOf(PluginRefusedError);
    await expect(plugin.closed()).rejects.toThrow(
      'the host refused this plugin: UNAUTHENTICATED: unknown plugin token',
    );
  });

  it('reconnects when the stream is lost: runs in flight are aborted (disconnected), new runs arrive on the new stream', async () => {
    const gw = await new Gateway().start();
    gateways.push(gw);
    const signals: AbortSignal[] = [];
    const plugin = start(gw.port, [echo(new Promise(() => undefined), (s) => signals.push(s))]);
    const welcomed = plugin.start();
    const one = await gw.calls.next();
    gw.welcome(one.call);
    await welcomed;
    gw.run(one.call, 'run-a', 'x');
    await gw.frames.next();
    const first = signals[0];
    one.call.emit(
      'error',
      Object.assign(new Error('gone'), { code: grpc.status.UNAVAILABLE, details: 'host going away' }),
    );
    const two = await gw.calls.next();
    expect(first?.reason).toMatchObject({ kind: 'disconnected' });
    expect((await gw.hellos.next()).plugin_author).toBe('acme'); // first hello
    expect((await gw.hellos.next()).plugin_author).toBe('acme'); // hello again
    gw.welcome(two.call);
    gw.run(two.call, 'run-b', 'y');
    const frame = await gw.frames.next();
    expect(frame.results[0]).toMatchObject({ run_id: 'run-b', sequence: 1 });
    expect(plugin.connections).toBe(2);
  });

  it('backoff: doubles from the first delay up to the cap, each delay 50-100 % of it (jitter)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 40 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (attempt, r) => {
          const full = Math.min(5_000, 250 * 2 ** attempt);
          const d = backoffDelay(attempt, {}, () => r);
          expect(d).toBeGreaterThanOrEqual(Math.floor(full / 2));
          expect(d).toBeLessThanOrEqual(full);
        },
      ),
    );
    expect([0, 1, 2, 3, 4, 5, 6].map((a) => backoffDelay(a, {}, () => 0))).toEqual([
      250, 500, 1000, 2000, 4000, 5000, 5000,
    ]);
    expect(backoffDelay(3, { initialDelayMs: 100, maxDelayMs: 10_000, jitter: 0 }, () => 0.9)).toBe(800);
  });

  it('refuses bad options, naming the field', () => {
    const base = { url: 'x', token: 't', author: 'a', plugin: 'p', runners: [echo()] };
    expect(() => new RunnerPlugin({ ...base, token: '' })).toThrow('token is required');
    expect(() => new RunnerPlugin({ ...base, plugin: '' })).toThrow('author and plugin are required');
    expect(() => new RunnerPlugin({ ...base, runners: [] })).toThrow('runners: at least one runner is required');
  });
});
