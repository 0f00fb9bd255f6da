import { Metadata } from '@grpc/grpc-js';
import type { AppConfig } from '@libs/config';
import type { PluginEntity, PluginsRepository } from '@libs/persistence';
import type { Hello, HostMessage, PluginMessage } from '@libs/proto';
import { ConnectSessionHandler } from './connect-session.handler';
import type { GrpcStatusError } from './grpc-error';
import type { PluginsService } from './plugins.service';
import { RunnerConnections, type InboundEvent } from './runner-connections';

const HEARTBEAT_MS = 1_000;
const PLUGIN = { plugin_id: 'acme/bot', author: 'acme', name: 'bot' } as PluginEntity;

const manifest = (name: string, extra: Record<string, unknown> = {}) => ({
  id: `plugin:acme/bot/${name}`,
  name,
  label: { en: name },
  protocol_version: '1',
  ...extra,
});

const hello = (extra: Partial<Hello> = {}): PluginMessage => ({
  hello: {
    plugin_author: 'acme',
    plugin_name: 'bot',
    plugin_version: '1.0.0',
    protocol_version: '1',
    manifests: [manifest('default')],
    ...extra,
  },
});

/** The plugin registry port: one valid token; its revision changes when the token is rotated. */
class FakePlugins {
  revision = 0;
  authenticated: string[] = [];
  authenticate(token: string): Promise<PluginEntity | null> {
    this.authenticated.push(token);
    return Promise.resolve(token === 'good' ? PLUGIN : null);
  }
  revisionOf(): number {
    return this.revision;
  }
}

function setup(token: string | null = 'good') {
  const plugins = new FakePlugins();
  const saved: unknown[] = [];
  const store = {
    saveRunners: (rows: unknown[]) => Promise.resolve(void saved.push(...rows)),
  } as unknown as PluginsRepository;
  const connections = new RunnerConnections();
  const inbound: InboundEvent[] = [];
  connections.inbound$.subscribe((e) => inbound.push(e));
  const config = { runs: { heartbeatIntervalMs: HEARTBEAT_MS } } as AppConfig;
  const handler = new ConnectSessionHandler(plugins as unknown as PluginsService, store, connections, config);
  const metadata = new Metadata();
  if (token !== null) {
    metadata.set('authorization', `Bearer ${token}`);
  }
  const out: HostMessage[] = [];
  let error: GrpcStatusError | null = null;
  let completed = false;
  const stream = handler.open(metadata, {
    send: (m) => out.push(m),
    fail: (e) => (error = e),
    end: () => (completed = true),
  });
  // The transport's events, as the gRPC adapter (connect.grpc.ts) reports them.
  const from = { next: (m: PluginMessage) => stream.receive(m), complete: () => stream.halfClosed() };
  const sub = { unsubscribe: () => stream.closed() };
  return {
    plugins,
    connections,
    inbound,
    saved,
    from,
    out,
    sub,
    error: () => error,
    code: () => (error ? String(error.metadata.get('x-error-code')[0]) : null),
    completed: () => completed,
  };
}

const settle = async () => {
  for (let i = 0; i < 5; i++) {
    await Promise.resolve();
  }
};

describe('ConnectSessionHandler: one Connect stream (docs/protocol.md)', () => {
  afterEach(() => jest.useRealTimers());

  it.each([
    ['no token', null, 'missing plugin token'],
    ['an unknown token', 'bad', 'invalid plugin token'],
  ])('closes a stream with %s unauthenticated', async (_name, token, message) => {
    const s = setup(token);
    await settle();
    expect(s.code()).toBe('unauthenticated');
    expect(s.error()!.details).toContain(message);
    expect(s.connections.sessions()).toEqual([]);
  });

  it('hello → welcome: valid manifests become runners, invalid ones are reported, the session is attached', async () => {
    const s = setup();
    s.from.next(
      hello({
        manifests: [manifest('default'), manifest('other', { id: 'plugin:evil/x/other' }), manifest('default')],
      }),
    );
    await settle();
    expect(s.error()).toBeNull();
    expect(s.out).toHaveLength(1);
    const welcome = s.out[0].welcome!;
    expect(welcome).toMatchObject({
      protocol_version: '1',
      heartbeat_interval_ms: HEARTBEAT_MS,
      runners: [{ runner_id: 'plugin:acme/bot/default', name: 'default' }],
    });
    expect(welcome.rejected).toEqual([
      { index: 1, name: 'other', reason: expect.stringContaining('manifest.id: must be "plugin:acme/bot/other"') },
      { index: 2, name: 'default', reason: 'manifest.name: "default" is declared twice' },
    ]);
    expect(s.connections.runner('plugin:acme/bot/default')?.session.session_id).toBe(welcome.session_id);
    expect(s.saved).toEqual([expect.objectContaining({ runner_id: 'plugin:acme/bot/default', plugin_id: 'acme/bot' })]);
    s.sub.unsubscribe();
  });

  it('messages sent before the token is checked wait, then are handled in order', async () => {
    const s = setup();
    // Sent synchronously, before authenticate() resolved.
    s.from.next(hello());
    s.from.next({ result: { run_id: 'r1', type: 'run.completed', sequence: 1 } });
    expect(s.out).toEqual([]);
    await settle();
    expect(s.out[0].welcome).toBeDefined();
    expect(s.inbound).toEqual([
      expect.objectContaining({ kind: 'result', result: expect.objectContaining({ run_id: 'r1' }) }),
    ]);
    s.sub.unsubscribe();
  });

  it('hands each result (single or batched) to the runner connections, in order', async () => {
    const s = setup();
    s.from.next(hello());
    await settle();
    s.from.next({ result: { run_id: 'r1', type: 'message.delta', sequence: 1 } });
    s.from.next({
      results: {
        results: [
          { run_id: 'r1', type: 'message.delta', sequence: 2 },
          { run_id: 'r2', type: 'run.completed', sequence: 1 },
        ],
      },
    });
    expect(s.inbound.map((e) => (e.kind === 'result' ? `${e.result.run_id}#${e.result.sequence}` : e.kind))).toEqual([
      'r1#1',
      'r1#2',
      'r2#1',
    ]);
    s.sub.unsubscribe();
  });

  it.each([
    ['a first message other than hello', [{ result: { run_id: 'r', type: 'x' } }], 'invalid_argument', 'must be hello'],
    ['a second hello', [hello(), hello()], 'invalid_argument', 'only once per stream'],
    ['a hello of another plugin', [hello({ plugin_name: 'other' })], 'unauthorized', 'the token belongs to acme/bot'],
    ['an unsupported protocol version', [hello({ protocol_version: '2' })], 'invalid_argument', 'protocol_version'],
  ])('closes the stream on %s', async (_name, messages: PluginMessage[], code, message) => {
    const s = setup();
    await settle();
    for (const m of messages) {
      s.from.next(m);
    }
    await settle();
    expect(s.code()).toBe(code);
    expect(s.error()!.details).toContain(message);
  });

  it('refuses a hello after the token was rotated since the stream opened', async () => {
    const s = setup();
    await settle();
    s.plugins.revision += 1;
    s.from.next(hello());
    expect(s.code()).toBe('unauthenticated');
    expect(s.connections.sessions()).toEqual([]);
  });

  it('closes a stream that sends no hello within 10 s', async () => {
    jest.useFakeTimers();
    const s = setup();
    await settle();
    jest.advanceTimersByTime(9_999);
    expect(s.error()).toBeNull();
    jest.advanceTimersByTime(1);
    expect(s.code()).toBe('invalid_argument');
    expect(s.error()!.details).toContain('no hello within 10 s');
  });

  it('pings every heartbeat interval, and drops a session silent for three of them', async () => {
    jest.useFakeTimers({ now: 0 });
    const s = setup();
    s.from.next(hello());
    await settle();
    jest.advanceTimersByTime(HEARTBEAT_MS);
    expect(s.out.filter((m) => m.ping)).toEqual([{ ping: { nonce: 1 } }]);
    s.from.next({ pong: { nonce: 1 } }); // anything the plugin sends counts
    jest.advanceTimersByTime(HEARTBEAT_MS * 3);
    expect(s.error()).toBeNull();
    jest.advanceTimersByTime(HEARTBEAT_MS * 2);
    expect(s.code()).toBe('unavailable');
    expect(s.error()!.details).toContain('sent nothing for 3 heartbeat intervals');
  });

  it('the plugin closing its stream detaches the session: its runs hear of the disconnect once', async () => {
    const s = setup();
    s.from.next(hello());
    await settle();
    s.from.complete();
    expect(s.completed()).toBe(true);
    expect(s.inbound).toEqual([expect.objectContaining({ kind: 'disconnected', reason: 'plugin closed the stream' })]);
    s.sub.unsubscribe(); // the teardown detaches again: nothing more is reported
    expect(s.inbound).toHaveLength(1);
    expect(s.connections.sessions()).toEqual([]);
  });

  it('a stream that ends before its token was checked attaches no session (nothing it sent is handled)', async () => {
    const s = setup();
    // Sent and closed synchronously, before authenticate() resolved.
    s.from.next(hello());
    s.from.complete();
    await settle();
    expect(s.completed()).toBe(true);
    expect(s.out).toEqual([]);
    expect(s.connections.sessions()).toEqual([]);
    expect(s.inbound).toEqual([]);
  });

  it("a session the host fails detaches with the failure as the runs' reason, and the stream ends once", async () => {
    const s = setup();
    s.from.next(hello());
    await settle();
    s.from.next(hello());
    expect(s.code()).toBe('invalid_argument');
    expect(s.inbound).toEqual([
      expect.objectContaining({ kind: 'disconnected', reason: 'hello may be sent only once per stream' }),
    ]);
    // Later events of the transport change nothing.
    s.from.next({ result: { run_id: 'r1', type: 'run.completed', sequence: 1 } });
    s.from.complete();
    s.sub.unsubscribe();
    expect(s.completed()).toBe(false);
    expect(s.inbound).toHaveLength(1);
  });
});
