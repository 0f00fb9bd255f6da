import * as grpc from '@grpc/grpc-js';
import { Session, type SessionOptions } from './connection';
import { silentLogger } from './log';
import { demoManifest } from './manifest';
import { createGatewayClient, loadGatewayService, type GatewayClient, type Hello, type PluginMessage } from './proto';
import { fromStruct, toStruct, type JsonObject } from './struct';

/** A queue that a test awaits item by item. */
class Inbox<T> {
  private items: T[] = [];
  private waiters: ((item: T) => void)[] = [];

  push(item: T): void {
    const waiter = this.waiters.shift();
    if (waiter) {
      waiter(item);
    } else {
      this.items.push(item);
    }
  }

  next(): Promise<T> {
    const item = this.items.shift();
    return item !== undefined ? Promise.resolve(item) : new Promise((resolve) => this.waiters.push(resolve));
  }
}

type HostCall = grpc.ServerDuplexStream<PluginMessage, object>;
interface Result {
  run_id: string;
  type: string;
  data: JsonObject;
  usage: JsonObject | null;
  sequence?: number;
}

/** A fake host: the real RunnerGatewayService from the same .proto, driven by the test. */
class FakeHost {
  readonly server = new grpc.Server();
  readonly calls = new Inbox<HostCall>();
  readonly hellos = new Inbox<Hello>();
  readonly results = new Inbox<Result>();
  readonly pongs = new Inbox<{ nonce: number }>();
  readonly heartbeats = new Inbox<{ active_run_ids: string[] }>();
  port = 0;

  async start(): Promise<void> {
    this.server.addService(loadGatewayService().service, {
      Connect: (call: HostCall) => {
        call.on('data', (message: PluginMessage) => {
          if (message.hello) {
            this.hellos.push(message.hello);
          } else if (message.result) {
            const r = message.result;
            this.results.push({ ...r, data: fromStruct(r.data), usage: r.usage ? fromStruct(r.usage) : null });
          } else if (message.pong) {
            this.pongs.push(message.pong);
          } else if (message.heartbeat) {
            this.heartbeats.push(message.heartbeat);
          }
        });
        call.on('end', () => call.end());
        this.calls.push(call);
      },
    });
    this.port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) =>
        err ? reject(err) : resolve(port),
      ),
    );
  }

  /** Results of one run up to and including its terminal result. */
  async resultsUntilTerminal(): Promise<Result[]> {
    const out: Result[] = [];
    for (;;) {
      const r = await this.results.next();
      out.push(r);
      if (r.type === 'run.completed' || r.type === 'run.failed') {
        return out;
      }
    }
  }
}

function runMessage(runId: string, text: string, config: JsonObject) {
  return {
    run: {
      runner_id: 'plugin:demo/echo/default',
      runner_name: 'default',
      context: { run_id: runId, input: { text }, config: toStruct(config), metadata: toStruct({}) },
    },
  };
}

const welcome = (heartbeat_interval_ms = 0) => ({
  welcome: {
    session_id: 'sess-1',
    host_version: 'test',
    protocol_version: '1',
    runners: [{ runner_id: 'plugin:demo/echo/default', name: 'default' }],
    rejected: [],
    heartbeat_interval_ms,
  },
});

describe('Session against a fake host over real gRPC', () => {
  let host: FakeHost;
  let client: GatewayClient;
  const sessions: Session[] = [];
  const options: SessionOptions = {
    token: 'secret-token',
    author: 'demo',
    plugin: 'echo',
    manifests: [demoManifest('demo', 'echo')],
    log: silentLogger,
  };
  const open = (overrides: Partial<SessionOptions> = {}) => {
    const session = new Session(client, { ...options, ...overrides });
    sessions.push(session);
    return session;
  };

  beforeEach(async () => {
    host = new FakeHost();
    await host.start();
    client = createGatewayClient(`127.0.0.1:${host.port}`);
  });

  afterEach(async () => {
    sessions.splice(0).forEach((s) => s.cancel());
    client.close();
    await new Promise<void>((resolve) => host.server.tryShutdown(() => resolve()));
  });

  it('says hello with the token and the manifest, answers ping, and echoes a run', async () => {
    open();
    const call = await host.calls.next();
    expect(call.metadata.get('authorization')).toEqual(['Bearer secret-token']);

    const hello = await host.hellos.next();
    expect(hello).toMatchObject({
      plugin_author: 'demo',
      plugin_name: 'echo',
      plugin_version: '0.1.0',
      protocol_version: '1',
    });
    expect(hello.manifests.map(fromStruct)).toEqual([demoManifest('demo', 'echo')]);
    expect(fromStruct(hello.manifests[0])).toMatchObject({
      id: 'plugin:demo/echo/default',
      name: 'default',
      capabilities: { streaming: true, interrupt: true },
    });

    call.write(welcome());
    call.write({ ping: { nonce: 42 } });
    expect(await host.pongs.next()).toEqual({ nonce: 42 });

    call.write(runMessage('r1', 'hello world', { mode: 'echo' }));
    const results = await host.resultsUntilTerminal();
    expect(results.map((r) => r.type)).toEqual([
      'message.delta',
      'message.delta',
      'message.completed',
      'run.completed',
    ]);
    expect(results.every((r) => r.run_id === 'r1')).toBe(true);
    expect(results.map((r) => r.sequence)).toEqual([1, 2, 3, 4]);
    expect(
      results.map((r) => (r.type === 'message.delta' ? ((r.data.chunk as JsonObject).content as string) : '')).join(''),
    ).toBe('hello world');
    expect(results[2].data).toEqual({ message: { role: 'assistant', content: 'hello world' } });
    expect(results[3].data).toEqual({ finish_reason: 'stop' });
    expect(results[3].usage).toEqual({ prompt_tokens: 2, completion_tokens: 2, total_tokens: 4 });
  });

  it('cancels a stalled run while another run completes on the same stream', async () => {
    open();
    const call = await host.calls.next();
    await host.hellos.next();
    call.write(welcome());

    call.write(runMessage('stalled', 'wait here', { mode: 'stall' }));
    expect(await host.results.next()).toMatchObject({ run_id: 'stalled', type: 'message.delta', sequence: 1 });

    call.write(runMessage('quick', 'hi', {}));
    expect((await host.resultsUntilTerminal()).map((r) => [r.run_id, r.type])).toEqual([
      ['quick', 'message.delta'],
      ['quick', 'message.completed'],
      ['quick', 'run.completed'],
    ]);

    call.write({ cancel: { run_id: 'stalled', reason: 'user' } });
    expect(await host.results.next()).toMatchObject({
      run_id: 'stalled',
      type: 'run.failed',
      data: { error: 'cancelled: user', code: 'cancelled', retryable: false },
      usage: null,
      sequence: 2,
      timestamp: expect.any(Number),
    });
  });

  it('sends heartbeats listing the active runs', async () => {
    open();
    const call = await host.calls.next();
    await host.hellos.next();
    call.write(runMessage('stalled', 'x', { mode: 'stall' }));
    await host.results.next();
    call.write(welcome(5));
    expect(await host.heartbeats.next()).toEqual({ active_run_ids: ['stalled'] });
  });

  it('reports how the stream ended: closed by the host after welcome', async () => {
    const session = open();
    const call = await host.calls.next();
    await host.hellos.next();
    call.write(welcome());
    call.end();
    await expect(session.done).resolves.toEqual({ code: grpc.status.OK, details: 'OK', welcomed: true });
  });

  it('reports UNAUTHENTICATED when the host refuses the token', async () => {
    const session = open({ token: 'wrong' });
    const call = await host.calls.next();
    call.emit('error', { code: grpc.status.UNAUTHENTICATED, details: 'bad plugin token' });
    await expect(session.done).resolves.toEqual({
      code: grpc.status.UNAUTHENTICATED,
      details: 'bad plugin token',
      welcomed: false,
    });
  });

  it('stop() half-closes the stream and the session ends cleanly', async () => {
    const session = open();
    const call = await host.calls.next();
    await host.hellos.next();
    call.write(welcome());
    session.stop();
    await expect(session.done).resolves.toMatchObject({ code: grpc.status.OK });
  });
});
