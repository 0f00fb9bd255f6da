import * as fs from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import * as fc from 'fast-check';
import { Host, TestDatabase, event, startDemoRunner, waitFor, type Proc } from './harness';
import { HostApiClient, toStruct, type HostApiMethod } from './host-api-client';
import { RawPlugin, manifestFor, rawPkg } from './raw-plugin';
import { extremeNumber, jsonValue, nastyString } from './fuzz/arbitraries';
import { countChanges, RowCounter, rssMiB, RSS_GROWTH_LIMIT_MIB } from './fuzz/checks';
import { params } from './fuzz/config';
import { Findings, shape } from './fuzz/findings';
import { ALL_HOST_API_METHODS, garbageBytes, hostApiTemplates, isHostFault, typedMutation } from './fuzz/grpc-messages';

jest.setTimeout(240_000);

// Property-based fuzzing of every gRPC method (issue 8): RunnerGatewayService/Connect and each
// HostApiService RPC, with well-formed messages carrying hostile values and with raw bytes no
// encoder would write. Properties: never INTERNAL/UNKNOWN, a refused call writes nothing, every
// run still ends with a terminal result, other runs of the plugin are unaffected, memory bounded.

const TABLES = ['plugins', 'runners', 'agents', 'events', 'runs', 'state_entries', 'storage_entries'];
const PERMISSIONS = {
  models: ['invoke', 'stream', 'rerank', 'count_tokens'],
  tools: ['detail', 'call'],
  knowledge_bases: ['list', 'retrieve'],
  history: ['page', 'search'],
  events: ['get', 'page'],
  storage: ['plugin', 'workspace', 'binding'],
};
const pass = (b: Buffer) => b;

describe('fuzz: gRPC', () => {
  const db = new TestDatabase();
  // The fuzz calls one run many times: the per-run rate limit would answer most of them.
  const host = new Host(db, { HOSTAPI_CALLS_PER_SECOND: '100000', HOSTAPI_BURST: '100000' });
  const counter = new RowCounter(db, TABLES);
  let demo: Proc;
  let raw: RawPlugin;
  let rawToken: string;
  let connToken: string;
  let api: HostApiClient;
  let generic: grpc.Client;
  let runId: string;
  let longRunId: string;
  let rssStart: number;
  /** The second workspace (docs/tenancy.md): a run of the same raw plugin, with a secret in its state and storage. */
  const ws2 = { runId: '', secret: `ws2-secret-${Math.random().toString(36).slice(2)}` };

  /** The second workspace's data, read back through its own run. */
  async function ws2Data(): Promise<unknown> {
    const ref = { run_id: ws2.runId, key: 'ws2-probe' };
    const [state, storage] = [
      await api.call('StateGet', { ...ref, scope: 'conversation' }),
      await api.call('StorageGet', { ...ref, area: 'plugin' }),
    ];
    return { state: state.err ?? state.res.value, storage: storage.err ?? Buffer.from(storage.res.value).toString() };
  }

  async function startRawRun(text: string): Promise<string> {
    const r = await host.api('POST', '/v1/events', event('fuzz-raw', text));
    expect(r.status).toBe(202);
    const m = await raw.next();
    expect(m.run?.context?.run_id).toBe(r.body.run_id);
    return r.body.run_id as string;
  }

  /** (Re)connects the raw plugin; it answers pings, as a live plugin must. */
  async function connectRaw(): Promise<void> {
    raw?.close();
    raw = new RawPlugin(host.grpc, rawToken);
    raw.call.on('data', (m: any) => m.ping && raw.call.write({ pong: { nonce: m.ping.nonce } }));
    const capabilities = { streaming: true, tool_calling: true, knowledge_retrieval: true };
    raw.hello('fuzz', 'raw', [manifestFor('fuzz', 'raw', { permissions: PERMISSIONS, capabilities })]);
    expect((await raw.next()).welcome).toBeDefined();
  }

  /** A finding when the fuzzed run of the raw plugin no longer runs; reconnects the plugin if it was dropped. */
  async function checkRawRun(findings: Findings, after: string): Promise<void> {
    const run = (await host.api('GET', `/v1/runs/${runId}`)).body;
    if (run.status !== 'running') {
      findings.add(`the raw plugin's other run ended ${run.status} (${run.status_reason}) after ${after}`, runId);
      await connectRaw();
      runId = await startRawRun('host api fuzz run (after reconnect)');
    }
  }

  beforeAll(async () => {
    await host.start();
    await counter.open();
    ({ runner: demo } = await startDemoRunner(host));
    await host.api('POST', '/v1/admin/agents', {
      agent_id: 'fuzz-long',
      runner_id: 'plugin:demo/echo/default',
      runner_config: { chunk_delay_ms: 40 },
    });
    rawToken = (await host.api('POST', '/v1/admin/plugins', { author: 'fuzz', name: 'raw' })).body.token;
    connToken = (await host.api('POST', '/v1/admin/plugins', { author: 'fuzz', name: 'conn' })).body.token;
    raw = new RawPlugin(host.grpc, rawToken);
    // A live plugin answers pings: a silent session is dropped after a few heartbeat intervals.
    raw.call.on('data', (m: any) => m.ping && raw.call.write({ pong: { nonce: m.ping.nonce } }));
    raw.hello('fuzz', 'raw', [
      manifestFor('fuzz', 'raw', {
        permissions: PERMISSIONS,
        capabilities: { streaming: true, tool_calling: true, knowledge_retrieval: true },
      }),
    ]);
    expect((await raw.next()).welcome).toBeDefined();
    const agent = await host.api('POST', '/v1/admin/agents', {
      agent_id: 'fuzz-raw',
      runner_id: 'plugin:fuzz/raw/default',
      resource_policy: { allow_binding_storage: true, allow_workspace_storage: true },
      state_policy: { state_scopes: ['conversation', 'actor', 'subject', 'runner'] },
    });
    expect(agent.status).toBe(201);
    runId = await startRawRun('host api fuzz run');
    api = new HostApiClient(host.grpc, rawToken);
    generic = new grpc.Client(host.grpc, grpc.credentials.createInsecure());
    const words = Array.from({ length: 350 }, (_, i) => `w${i}`).join(' ');
    longRunId = (await host.api('POST', '/v1/events', event('fuzz-long', words))).body.run_id;
    // The second workspace: the same raw plugin serves its agent; its run holds a secret.
    expect((await host.api('POST', '/v1/admin/workspaces', { workspace_id: 'fuzz-ws2' })).status).toBe(201);
    const ws2Agent = await host.api('POST', '/v1/admin/agents', {
      agent_id: 'ws2-raw',
      runner_id: 'plugin:fuzz/raw/default',
      workspace_id: 'fuzz-ws2',
      state_policy: { state_scopes: ['conversation'] },
    });
    expect(ws2Agent.status).toBe(201);
    const ws2Run = await host.api('POST', '/v1/events', event('ws2-raw', 'second workspace run'));
    expect(ws2Run.status).toBe(202);
    expect((await raw.next()).run?.context?.run_id).toBe(ws2Run.body.run_id);
    ws2.runId = ws2Run.body.run_id as string;
    const ref = { run_id: ws2.runId, key: 'ws2-probe' };
    expect((await api.call('StateSet', { ...ref, scope: 'conversation', value: ws2.secret })).err).toBeUndefined();
    expect(
      (await api.call('StorageSet', { ...ref, area: 'plugin', value: Buffer.from(ws2.secret) })).err,
    ).toBeUndefined();
    expect(await ws2Data()).toEqual({ state: ws2.secret, storage: ws2.secret });
    rssStart = rssMiB(host.proc.child.pid!);
  });

  afterAll(async () => {
    if (process.env.FUZZ_HOST_LOG) {
      fs.writeFileSync(process.env.FUZZ_HOST_LOG, host.proc.logs()); // for diagnosing a finding
    }
    generic?.close();
    api?.close();
    raw?.close();
    await counter.close();
    await demo?.stop();
    await host.stop();
    await db.drop();
  });

  it('HostApiService: well-formed requests with hostile values', async () => {
    const findings = new Findings();
    const templates = hostApiTemplates(runId);
    const arb = fc.oneof(
      ...Object.entries(templates).map(([method, t]) => typedMutation(t).map((req) => ({ method, req }))),
    );
    await fc.assert(
      fc.asyncProperty(arb, async ({ method, req }) => {
        const before = await counter.counts();
        const r = await api.call(method as HostApiMethod, req as never);
        const example = `${method} ${JSON.stringify(req).slice(0, 400)}`;
        if (isHostFault(r.err)) {
          findings.add(`${method}: ${grpc.status[r.err!.code]} (${shape(r.err!.details)})`, example);
        }
        // Calls in the default workspace's run never read the second workspace's data.
        if (
          !r.err &&
          JSON.stringify(r.res, (_k, v: unknown) => (Buffer.isBuffer(v) ? v.toString() : v)).includes(ws2.secret)
        ) {
          findings.add(`${method}: answered with the second workspace's data`, example);
        }
        if (r.err) {
          const changes = countChanges(before, await counter.counts());
          if (changes.length > 0) {
            findings.add(`${method}: refused (${grpc.status[r.err.code]}) but wrote ${changes.join(', ')}`, example);
          }
        }
      }),
      params(120),
    );
    await checkRawRun(findings, 'the host API fuzz');
    expect(findings.list()).toEqual([]);
    // Nothing of the second workspace changed.
    expect(await ws2Data()).toEqual({ state: ws2.secret, storage: ws2.secret });
  });

  it('HostApiService.StreamModel: well-formed requests with hostile values', async () => {
    const findings = new Findings();
    await fc.assert(
      fc.asyncProperty(typedMutation(hostApiTemplates(runId).InvokeModel), async (req) => {
        const r = await api.streamModel(req as never);
        if (isHostFault(r.err)) {
          findings.add(
            `StreamModel: ${grpc.status[r.err!.code]} (${shape(r.err!.details)})`,
            JSON.stringify(req).slice(0, 400),
          );
        }
      }),
      params(15),
    );
    expect(findings.list()).toEqual([]);
  });

  it('HostApiService: raw garbage bytes on every method', async () => {
    const findings = new Findings();
    const arb = fc.tuple(fc.constantFrom(...ALL_HOST_API_METHODS), garbageBytes, fc.boolean());
    await fc.assert(
      fc.asyncProperty(arb, async ([method, bytes, withToken]) => {
        const md = new grpc.Metadata();
        if (withToken) {
          md.set('authorization', `Bearer ${rawToken}`);
        }
        const path = `/runnerhost.v1.HostApiService/${method}`;
        const deadline = new Date(Date.now() + 10_000);
        const err = await new Promise<grpc.ServiceError | null>((resolve) => {
          if (method === 'StreamModel') {
            const call = generic.makeServerStreamRequest(path, pass, pass, bytes, md, { deadline });
            call.on('data', () => undefined);
            call.on('error', (e: grpc.ServiceError) => resolve(e));
            call.on('end', () => resolve(null));
          } else {
            generic.makeUnaryRequest(path, pass, pass, bytes, md, { deadline }, (e) => resolve(e));
          }
        });
        if (err && isHostFault(err)) {
          const x = err.metadata?.get('x-error-code')[0];
          findings.add(
            `${method}: ${grpc.status[err.code]} x-error-code=${String(x)} (${shape(err.details)})`,
            `bytes=${bytes.toString('hex').slice(0, 80)} token=${withToken}`,
          );
        }
      }),
      params(80),
    );
    await checkRawRun(findings, 'the host API garbage');
    expect(findings.list()).toEqual([]);
  });

  /** Opens a Connect stream, writes, and waits briefly for the status the host ends it with. */
  async function connectOnce(write: (call: any) => void, useGeneric = false): Promise<grpc.ServiceError | null> {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${connToken}`);
    const client = useGeneric
      ? generic
      : new rawPkg.runnerhost.v1.RunnerGatewayService(host.grpc, grpc.credentials.createInsecure());
    const call = useGeneric
      ? generic.makeBidiStreamRequest('/runnerhost.v1.RunnerGatewayService/Connect', pass, pass, md)
      : client.Connect(md);
    const ended = new Promise<grpc.ServiceError | null>((resolve) => {
      call.on('data', () => undefined);
      call.on('error', (e: grpc.ServiceError) => resolve(e));
      call.on('end', () => resolve(null));
      setTimeout(() => resolve(null), 400);
    });
    try {
      write(call);
    } catch {
      // The client could not encode the message: nothing reached the host.
    }
    const err = await ended;
    call.cancel();
    if (!useGeneric) {
      client.close();
    }
    return err;
  }

  it('RunnerGatewayService/Connect: well-formed messages with hostile values', async () => {
    const findings = new Findings();
    const hello = fc
      .record({
        plugin_author: fc.oneof(fc.constant('fuzz'), nastyString),
        plugin_name: fc.oneof(fc.constant('conn'), nastyString),
        plugin_version: nastyString,
        protocol_version: fc.oneof(fc.constant('1'), nastyString),
        manifests: fc.array(
          fc.oneof(
            fc.constant(manifestFor('fuzz', 'conn')),
            jsonValue.map((v) => ({ ...manifestFor('fuzz', 'conn'), metadata: { v } })),
            fc.dictionary(nastyString, jsonValue, { maxKeys: 4 }),
          ),
          { maxLength: 3 },
        ),
      })
      .map((h) => ({ hello: { ...h, manifests: h.manifests.map((m) => toStruct(m as Record<string, unknown>)) } }));
    const result = fc
      .record({
        run_id: fc.oneof(fc.constant(runId), nastyString, fc.uuid().map(String)),
        type: fc.oneof(fc.constantFrom('message.delta', 'run.completed', 'run.failed', 'state.updated'), nastyString),
        data: fc.dictionary(nastyString, jsonValue, { maxKeys: 4 }),
        sequence: fc.option(extremeNumber, { nil: undefined }),
        timestamp: fc.option(extremeNumber, { nil: undefined }),
      })
      .map((r) => ({ result: { ...r, data: toStruct(r.data) } }));
    const other = fc.oneof(
      fc.array(nastyString, { maxLength: 3 }).map((ids) => ({ heartbeat: { active_run_ids: ids } })),
      extremeNumber.map((n) => ({ pong: { nonce: Math.trunc(n) } })),
      fc.constant({}),
    );
    const messages = fc.array(fc.oneof(hello, result, other), { minLength: 1, maxLength: 4 });
    await fc.assert(
      fc.asyncProperty(messages, async (msgs) => {
        const err = await connectOnce((call) => msgs.forEach((m) => call.write(m)));
        if (isHostFault(err ?? undefined)) {
          findings.add(
            `Connect: ${grpc.status[err!.code]} (${shape(err!.details)})`,
            JSON.stringify(msgs).slice(0, 400),
          );
        }
      }),
      params(40),
    );
    // Another session's messages must not touch the raw plugin's run or its stream.
    await checkRawRun(findings, 'the Connect fuzz');
    expect(findings.list()).toEqual([]);
  });

  it('RunnerGatewayService/Connect: raw garbage bytes', async () => {
    const findings = new Findings();
    await fc.assert(
      fc.asyncProperty(fc.array(garbageBytes, { minLength: 1, maxLength: 3 }), async (frames) => {
        const err = await connectOnce((call) => frames.forEach((f) => call.write(f)), true);
        if (isHostFault(err ?? undefined)) {
          const x = err!.metadata?.get('x-error-code')[0];
          findings.add(
            `Connect: ${grpc.status[err!.code]} x-error-code=${String(x)} (${shape(err!.details)})`,
            frames.map((f) => f.toString('hex').slice(0, 60)).join(' | '),
          );
        }
      }),
      params(30),
    );
    await checkRawRun(findings, 'the Connect garbage');
    expect(findings.list()).toEqual([]);
  });

  it('results with hostile values never leave a run without its terminal result', async () => {
    const findings = new Findings();
    const results = fc.array(
      fc.record({
        type: fc.oneof(
          fc.constantFrom('message.delta', 'message.completed', 'state.updated', 'demo.custom'),
          nastyString,
        ),
        data: fc.dictionary(nastyString, jsonValue, { maxKeys: 3 }),
        sequence: fc.option(extremeNumber, { nil: undefined }),
      }),
      { minLength: 1, maxLength: 4 },
    );
    await fc.assert(
      fc.asyncProperty(results, async (rs) => {
        const id = await startRawRun('results fuzz');
        for (const r of rs) {
          raw.call.write({
            result: {
              run_id: id,
              type: r.type,
              data: toStruct(r.data),
              ...(r.sequence === undefined ? {} : { sequence: Math.trunc(r.sequence) }),
            },
          });
        }
        raw.result(id, 'run.completed', { finish_reason: 'stop' });
        const ended = await waitFor(
          'run ends',
          async () => {
            const s = (await host.api('GET', `/v1/runs/${id}`)).body.status;
            return s !== 'running' && s !== 'pending' ? s : null;
          },
          3000,
        ).catch(() => null);
        if (!ended) {
          findings.add('a run stays running after its terminal result', JSON.stringify(rs).slice(0, 400));
        }
      }),
      params(10),
    );
    expect(findings.list()).toEqual([]);
  });

  it('the fuzzed run, the long run of another plugin and the host all came through', async () => {
    expect(await ws2Data()).toEqual({ state: ws2.secret, storage: ws2.secret });
    raw.result(ws2.runId, 'run.completed', { finish_reason: 'stop' });
    raw.result(runId, 'run.completed', { finish_reason: 'stop' });
    const status = await waitFor('fuzzed run ends', async () => {
      const s = (await host.api('GET', `/v1/runs/${runId}`)).body.status;
      return s !== 'running' ? s : null;
    });
    expect(status).toBe('completed');
    const long = await waitFor(
      'long run ends',
      async () => {
        const s = (await host.api('GET', `/v1/runs/${longRunId}`)).body.status;
        return s !== 'running' && s !== 'pending' ? s : null;
      },
      60_000,
    );
    expect(long).toBe('completed');
    expect((await host.api('GET', '/health/live')).status).toBe(200);
    expect(rssMiB(host.proc.child.pid!) - rssStart).toBeLessThan(RSS_GROWTH_LIMIT_MIB);
  });
});
