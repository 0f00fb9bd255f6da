import * as path from 'node:path';
import { ScriptedOpenAIServer, scripts } from '@libs/testing';
import {
  Host,
  TestDatabase,
  event,
  freePort,
  launchDemoRunner,
  runnerConnected,
  startDemoRunner,
  waitFor,
  type Proc,
} from './harness';
import { scrape, type Scrape } from './prom-text';
import { conversationRuns, message } from './steering-support';

jest.setTimeout(180_000);

/*
 * GET /metrics on METRICS_PORT, read with a strict Prometheus text parser (prom-text.ts) before
 * and after real traffic: runs of a gRPC plugin (the demo runner) and of the built-in local agent
 * (model calls to the scripted OpenAI-compatible server, a real MCP tool over stdio, host-API
 * calls through the gate), a steered follow-up, a webhook that fails, an SSE reader and a plugin
 * that reconnects. Every series moves as it should; no label carries a run id or user text.
 * SQLite by default, PostgreSQL with E2E_DATABASE=postgres.
 */

const DEMO = 'plugin:demo/echo/default';
const LOCAL = 'builtin:local-agent/default';
const KEY = 'sk-scripted-metrics-0123456789';
const MCP_STDIO_ARGS = [
  '-r',
  require.resolve('ts-node/register/transpile-only'),
  path.join(__dirname, 'fixtures', 'mcp-stdio-server.ts'),
];
const USER_TEXT = 'zebra-quokka-marmalade telemetry probe';

describe('Prometheus metrics', () => {
  const db = new TestDatabase();
  let host: Host;
  let server: ScriptedOpenAIServer;
  let runner: Proc;
  let token: string;

  beforeAll(async () => {
    server = await ScriptedOpenAIServer.start();
    host = new Host(db, {
      HOST_INSTANCE_ID: 'e2e-host-1',
      SCRIPTED_KEY: KEY,
      SECRET_ENV_ALLOWLIST: 'SCRIPTED_KEY,RUNNERHOST_SECRET_*',
      RUNNERHOST_SECRET_HOOK: 'whsec-metrics-0123456789',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_MAX_ATTEMPTS: '2',
      WEBHOOK_RETRY_BASE_MS: '1500',
      WEBHOOK_RETRY_MAX_MS: '1500',
      WEBHOOK_TIMEOUT_MS: '1000',
    });
    await host.start();
    ({ runner, token } = await startDemoRunner(host, { env: { DEMO_STEERING: '1' } }));
    const deadPort = await freePort(); // nothing listens: every webhook attempt is refused
    const created = async (p: string, body: unknown) => {
      const r = await host.api('POST', p, body);
      expect({ p, status: r.status }).toEqual({ p, status: 201 });
    };
    await created('/v1/admin/agents', {
      agent_id: 'hooked',
      runner_id: DEMO,
      runner_config: { mode: 'echo' },
      delivery_policy: {
        edit_interval_ms: 100,
        min_edit_chars: 0,
        webhook: { url: `http://127.0.0.1:${deadPort}/hook`, secret_env: 'RUNNERHOST_SECRET_HOOK' },
      },
    });
    await created('/v1/admin/agents', {
      agent_id: 'steer',
      runner_id: DEMO,
      runner_config: { mode: 'steer', chunk_delay_ms: 150, steer_wait_ms: 1500 },
    });
    await created('/v1/admin/models', {
      model_id: 'primary',
      kind: 'chat',
      provider: 'openai',
      base_url: server.baseUrl,
      api_key_env: 'SCRIPTED_KEY',
      model_name: 'scripted-primary',
      context_window: 128000,
      max_output_tokens: 4096,
      abilities: { tool_calling: true, vision: false, streaming: true },
      tokenizer: 'o200k_base',
    });
    const source = await host.api('POST', '/v1/admin/tools/sources', {
      source_id: 'local',
      kind: 'mcp_stdio',
      config: { command: process.execPath, args: MCP_STDIO_ARGS },
    });
    expect(source.body).toMatchObject({ status: 'connected' });
    await created('/v1/admin/agents', {
      agent_id: 'helper',
      runner_id: LOCAL,
      runner_config: { model: { primary: 'primary' } },
      resource_policy: { allowed_model_ids: ['primary'], allowed_tool_names: ['add'], allowed_kb_ids: [] },
    });
  });

  afterAll(async () => {
    await runner?.stop();
    await host?.stop();
    await server?.close();
    await db.drop();
  });

  const diff = (before: Scrape, after: Scrape, sample: string, match: Record<string, string> = {}) =>
    after.sum(sample, match) - before.sum(sample, match);
  const finished = (runId: string) =>
    waitFor('run end', async () => (await host.api('GET', `/v1/runs/${runId}`)).body.finished_at !== null, 60_000);

  it('moves every series with runs, steering, a failing webhook, host-API, model and tool calls', async () => {
    const before = await scrape(host.metrics);
    expect(before.sum('runnerhost_runner_connections')).toBe(1);
    expect(before.sum('runnerhost_active_runs')).toBe(0);
    expect(before.sum('runnerhost_runner_connects_total', { kind: 'first' })).toBe(1);

    // 1. A plugin run whose webhook fails: delivery ops, a retry, then the op gives up.
    const hooked = await host.api(
      'POST',
      '/v1/events',
      event('hooked', USER_TEXT, { delivery: { surface: 'telegram', reply_target: { chat_id: 7 } } }),
    );
    expect(hooked.status).toBe(202);
    const hookedRun = hooked.body.run_id as string;
    await finished(hookedRun);
    const pending = await waitFor('a webhook retry', async () => {
      const s = await scrape(host.metrics);
      return s.sum('runnerhost_webhook_attempts_total', { outcome: 'retry' }) >= 1 && s;
    });
    // The first op waits for its retry: the outbox is behind.
    expect(pending.sum('runnerhost_outbox_oldest_pending_age_seconds')).toBeGreaterThan(0);

    // 2. A steered follow-up into a running run of a conversation (the runner pulls it).
    const conv = `conv-metrics-${Date.now()}`;
    const first = await host.api('POST', '/v1/events', message('steer', conv, 'one two three four five six seven'));
    expect(first.body.disposition).toBe('started');
    const during = await scrape(host.metrics);
    expect(during.sum('runnerhost_active_runs')).toBeGreaterThanOrEqual(1);
    const follow = await host.api('POST', '/v1/events', message('steer', conv, 'and a follow-up'));
    expect(follow.body).toMatchObject({ disposition: 'steered', run_id: first.body.run_id, position: 1 });
    const convRuns = await conversationRuns(host, conv, 60_000); // reads each run's SSE stream
    expect(convRuns.map((r) => r.status)).toEqual(['completed']);

    // 3. A local-agent run: a model call asks for the MCP tool, a second one answers.
    server.chat(scripts.toolCalls([{ id: 'call_add', name: 'add', arguments: '{"a":2,"b":3}' }]), scripts.reply('5'));
    const local = await host.api('POST', '/v1/events', event('helper', 'What is 2 + 3?'));
    expect(local.status).toBe(202);
    const localEvents = await host.sse(local.body.run_id);
    expect(localEvents.at(-1)!.data.type).toBe('run.completed');

    // 4. The plugin restarts: a disconnect and a reconnect.
    await runner.stop();
    await waitFor('runner gone', async () => (await scrape(host.metrics)).sum('runnerhost_runner_connections') === 0);
    runner = launchDemoRunner(host, token, { env: { DEMO_STEERING: '1' } });
    await runnerConnected(host, DEMO);

    // The failing webhook gives up after its second attempt; the outbox is caught up.
    const after = await waitFor('the webhook op failed', async () => {
      const s = await scrape(host.metrics);
      return s.sum('runnerhost_webhook_attempts_total', { outcome: 'failed' }) >= 1 && s;
    });

    // Admissions and ends, by disposition, status and runner.
    expect(diff(before, after, 'runnerhost_events_admitted_total', { disposition: 'started', runner_id: DEMO })).toBe(
      2,
    );
    expect(diff(before, after, 'runnerhost_events_admitted_total', { disposition: 'steered', runner_id: DEMO })).toBe(
      1,
    );
    expect(diff(before, after, 'runnerhost_events_admitted_total', { disposition: 'started', runner_id: LOCAL })).toBe(
      1,
    );
    expect(diff(before, after, 'runnerhost_runs_ended_total', { status: 'completed', runner_id: DEMO })).toBe(2);
    expect(diff(before, after, 'runnerhost_runs_ended_total', { status: 'completed', runner_id: LOCAL })).toBe(1);
    expect(after.sum('runnerhost_active_runs')).toBe(0);
    for (const phase of ['dispatch', 'first_result', 'end']) {
      const name = `runnerhost_run_admission_to_${phase}_seconds`;
      expect(diff(before, after, `${name}_count`, { runner_id: DEMO })).toBe(2);
      expect(diff(before, after, `${name}_count`, { runner_id: LOCAL })).toBe(1);
      expect(after.family(name).type).toBe('histogram');
      // Cumulative buckets: +Inf holds every observation.
      expect(after.sum(`${name}_bucket`, { runner_id: DEMO, le: '+Inf' })).toBe(
        after.sum(`${name}_count`, { runner_id: DEMO }),
      );
    }
    // Results: deltas counted apart from other results; three terminal results.
    expect(diff(before, after, 'runnerhost_results_ingested_total', { kind: 'delta' })).toBeGreaterThanOrEqual(8);
    expect(diff(before, after, 'runnerhost_results_ingested_total', { kind: 'result' })).toBeGreaterThanOrEqual(3);
    expect(diff(before, after, 'runnerhost_results_ingested_total', { kind: 'terminal' })).toBe(3);
    // SSE readers: opened (the conversation's run, the local run), none open now, none cut.
    expect(diff(before, after, 'runnerhost_sse_readers_opened_total')).toBeGreaterThanOrEqual(2);
    expect(after.sum('runnerhost_sse_readers')).toBe(0);
    expect(after.family('runnerhost_sse_readers_cut_total').samples).toHaveLength(1);
    expect(after.sum('runnerhost_sse_readers_cut_total')).toBe(0);
    // Steering: one item joined a queue at depth 1 and was pulled.
    expect(diff(before, after, 'runnerhost_steering_queue_depth_count')).toBe(1);
    expect(diff(before, after, 'runnerhost_steering_queue_depth_bucket', { le: '1' })).toBe(1);
    expect(diff(before, after, 'runnerhost_steering_pulls_total', { outcome: 'items' })).toBe(1);
    expect(diff(before, after, 'runnerhost_steering_pull_wait_seconds_count')).toBeGreaterThanOrEqual(2);
    // Delivery: ops written for the hooked run; one retry, one give-up; the outbox caught up.
    expect(diff(before, after, 'runnerhost_delivery_ops_total')).toBeGreaterThanOrEqual(1);
    expect(after.labelValues('runnerhost_delivery_ops_total', 'op').length).toBeGreaterThanOrEqual(1);
    expect(diff(before, after, 'runnerhost_webhook_attempts_total', { outcome: 'retry' })).toBe(1);
    expect(diff(before, after, 'runnerhost_webhook_attempts_total', { outcome: 'failed' })).toBe(1);
    expect(after.sum('runnerhost_webhook_attempts_total', { outcome: 'delivered' })).toBe(0);
    expect(after.sum('runnerhost_outbox_oldest_pending_age_seconds')).toBe(0);
    // Host API: the local agent's model calls and the demo runner's steering pulls, through the gate.
    expect(diff(before, after, 'runnerhost_host_api_calls_total', { action: 'model.stream', outcome: 'ok' })).toBe(2);
    expect(diff(before, after, 'runnerhost_host_api_calls_total', { action: 'tool.call', outcome: 'ok' })).toBe(1);
    expect(
      diff(before, after, 'runnerhost_host_api_calls_total', { action: 'steering.pull', outcome: 'ok' }),
    ).toBeGreaterThanOrEqual(2);
    expect(diff(before, after, 'runnerhost_host_api_call_duration_seconds_count', { action: 'model.stream' })).toBe(2);
    // Models: two streamed calls of `primary`, their tokens metered; one MCP tool call.
    expect(
      diff(before, after, 'runnerhost_model_calls_total', { model_id: 'primary', operation: 'stream', outcome: 'ok' }),
    ).toBe(2);
    expect(
      diff(before, after, 'runnerhost_model_tokens_total', { model_id: 'primary', type: 'prompt' }),
    ).toBeGreaterThan(0);
    expect(
      diff(before, after, 'runnerhost_model_tokens_total', { model_id: 'primary', type: 'completion' }),
    ).toBeGreaterThan(0);
    expect(diff(before, after, 'runnerhost_model_call_duration_seconds_count', { model_id: 'primary' })).toBe(2);
    expect(diff(before, after, 'runnerhost_tool_calls_total', { source: 'mcp', outcome: 'ok' })).toBe(1);
    expect(diff(before, after, 'runnerhost_tool_call_duration_seconds_count', { source: 'mcp' })).toBe(1);
    // Runner connections: the plugin went and came back.
    expect(after.sum('runnerhost_runner_connections')).toBe(1);
    expect(diff(before, after, 'runnerhost_runner_disconnects_total')).toBe(1);
    expect(diff(before, after, 'runnerhost_runner_connects_total', { kind: 'reconnect' })).toBe(1);
    // The writer: groups committed, each timed; nothing waiting now.
    expect(diff(before, after, 'runnerhost_writer_group_units_count')).toBeGreaterThan(0);
    expect(diff(before, after, 'runnerhost_writer_group_units_sum')).toBeGreaterThanOrEqual(
      diff(before, after, 'runnerhost_writer_group_units_count'),
    );
    expect(diff(before, after, 'runnerhost_writer_commit_duration_seconds_count')).toBe(
      diff(before, after, 'runnerhost_writer_group_units_count'),
    );
    expect(after.family('runnerhost_writer_queue_depth').type).toBe('gauge');
    expect(after.family('runnerhost_wal_bytes').type).toBe('gauge');
    if (process.env.E2E_DATABASE !== 'postgres') {
      expect(after.sum('runnerhost_wal_bytes')).toBeGreaterThanOrEqual(0);
    }
    // The signal bus (SIGNAL_BUS auto: memory on SQLite, postgres on PostgreSQL), copied at scrape time.
    const bus = process.env.E2E_DATABASE === 'postgres' ? 'postgres' : 'memory';
    expect(after.family('runnerhost_signal_bus_signals_total').type).toBe('counter');
    expect(after.family('runnerhost_signal_bus_connected').type).toBe('gauge');
    expect(after.labelValues('runnerhost_signal_bus_signals_total', 'bus')).toEqual([bus]);
    expect(after.sum('runnerhost_signal_bus_connected', { bus })).toBe(1);
    expect(after.sum('runnerhost_signal_bus_disconnects_total', { bus })).toBe(0);
    expect(after.sum('runnerhost_signal_bus_signals_total', { bus, outcome: 'dropped' })).toBe(0);
    // The steered follow-up and the ended runs signalled: only a shared bus hands them to a transport.
    const sent = diff(before, after, 'runnerhost_signal_bus_signals_total', { bus, outcome: 'sent' });
    if (bus === 'postgres') {
      expect(sent).toBeGreaterThan(0);
    } else {
      expect(sent).toBe(0);
    }

    // The Node process: event-loop lag, CPU, memory.
    expect(after.family('nodejs_eventloop_lag_seconds').type).toBe('gauge');
    expect(after.family('process_cpu_user_seconds_total').type).toBe('counter');
    expect(after.sum('process_resident_memory_bytes')).toBeGreaterThan(0);

    // Every series says which process it is; no label carries a run id or the user's text.
    const runIds = [hookedRun, first.body.run_id, local.body.run_id] as string[];
    for (const f of after.families.values()) {
      for (const s of f.samples) {
        expect({ series: s.name, instance: s.labels.host_instance }).toEqual({
          series: s.name,
          instance: 'e2e-host-1',
        });
        for (const v of Object.values(s.labels)) {
          expect(runIds.some((id) => v.includes(id)) || v.includes('zebra') || v.includes('follow-up')).toBe(false);
        }
      }
    }
  });

  it('serves only GET /metrics on its port', async () => {
    expect((await fetch(`${host.metrics}/`)).status).toBe(404);
    expect((await fetch(`${host.metrics}/metrics`, { method: 'POST' })).status).toBe(405);
    // Not on the API port: that one needs an API key and does not serve metrics.
    expect((await fetch(`${host.http}/metrics`)).status).toBe(404);
  });
});

describe('METRICS=off', () => {
  const db = new TestDatabase();
  const host = new Host(db, { METRICS: 'off' });

  beforeAll(() => host.start());
  afterAll(async () => {
    await host.stop();
    await db.drop();
  });

  it('opens no metrics listener', async () => {
    await expect(fetch(`${host.metrics}/metrics`)).rejects.toThrow();
  });
});
