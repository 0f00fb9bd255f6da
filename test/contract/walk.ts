/**
 * The contract walk: a client generated from the host's served /openapi.json (openapi-typescript,
 * into ./schema.d.ts) and openapi-fetch, compiled under strict tsc and run against a live host by
 * test/e2e/openapi-contract.e2e-spec.ts. Every call below type-checks against the document, so a
 * document that lies about a path, a parameter, a body or an answer fails here, at compile time or
 * when the host answers something else.
 *
 * Input (environment): CONTRACT_HOST_URL, CONTRACT_GRPC_URL, CONTRACT_ADMIN_KEY, CONTRACT_RUNNER_MAIN.
 * Output: one line per step on stdout; exit code 1 on the first broken expectation.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import createClient from 'openapi-fetch';
import type { components, paths } from './schema';

type Schemas = components['schemas'];

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set`);
  }
  return v;
};
const baseUrl = env('CONTRACT_HOST_URL');
const adminKey = env('CONTRACT_ADMIN_KEY');

const admin = createClient<paths>({ baseUrl, headers: { authorization: `Bearer ${adminKey}` } });
const anonymous = createClient<paths>({ baseUrl });

function check(ok: boolean, what: string, got?: unknown): void {
  if (!ok) {
    throw new Error(`${what}${got === undefined ? '' : `: got ${JSON.stringify(got)}`}`);
  }
}
function step(name: string): void {
  process.stdout.write(`ok ${name}\n`);
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** SSE frames of a text/event-stream body (comments skipped). */
function frames(text: string): { id: number; event: string; data: Schemas['RunResultDto'] }[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '' && !block.startsWith(':'))
    .map((block) => {
      const fields = new Map<string, string>();
      for (const line of block.split('\n')) {
        const i = line.indexOf(':');
        fields.set(line.slice(0, i), line.slice(i + 1).trimStart());
      }
      return {
        id: Number(fields.get('id')),
        event: fields.get('event') ?? '',
        data: JSON.parse(fields.get('data') ?? 'null') as Schemas['RunResultDto'],
      };
    });
}

async function readAll(body: ReadableStream<Uint8Array>): Promise<string> {
  const decoder = new TextDecoder();
  let text = '';
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    text += decoder.decode(chunk, { stream: true });
  }
  return text + decoder.decode();
}

async function walk(children: ChildProcess[]): Promise<void> {
  // Errors are typed: the 401 body is the error schema, not `never`.
  const denied = await anonymous.GET('/v1/admin/agents');
  check(denied.response.status === 401 && denied.error?.error.code === 'unauthenticated', '401 typed', denied.error);
  const live = await anonymous.GET('/health/live');
  check(live.data?.status === 'ok', 'health without a key', live.data);
  step('errors and health');

  // Plugin: register, start the demo runner with its token, see it connected with its manifest.
  const plugin = await admin.POST('/v1/admin/plugins', { body: { author: 'contract', name: 'echo' } });
  check(plugin.response.status === 201 && plugin.data !== undefined, 'plugin registered', plugin.error);
  const runner = spawn(process.execPath, [env('CONTRACT_RUNNER_MAIN')], {
    env: {
      ...process.env,
      RUNNERHOST_GRPC_URL: env('CONTRACT_GRPC_URL'),
      RUNNERHOST_PLUGIN_TOKEN: plugin.data!.token,
      RUNNERHOST_PLUGIN_AUTHOR: 'contract',
      RUNNERHOST_PLUGIN_NAME: 'echo',
    },
    stdio: 'ignore',
  });
  children.push(runner);
  const runnerId = 'plugin:contract/echo/default';
  let connected: Schemas['RunnerDto'] | undefined;
  for (let i = 0; i < 300 && !connected; i++) {
    const runners = await admin.GET('/v1/admin/runners');
    connected = runners.data?.find((r) => r.runner_id === runnerId && r.state === 'connected');
    if (!connected) {
      await sleep(50);
    }
  }
  check(connected?.manifest.protocol_version === '1', 'runner connected with its manifest', connected);
  const plugins = await admin.GET('/v1/admin/plugins');
  check(plugins.data?.some((p) => p.plugin_id === plugin.data!.plugin_id) === true, 'plugin listed');
  step('plugin and runner');

  // Agent: create with typed policies, read, replace with its version.
  const agentId = 'contract-echo';
  const created = await admin.POST('/v1/admin/agents', {
    body: {
      agent_id: agentId,
      runner_id: runnerId,
      runner_config: { mode: 'echo' },
      resource_policy: { allow_plugin_storage: true, history: ['page'] },
      concurrency_policy: { mode: 'queue' },
    },
  });
  check(created.response.status === 201 && created.data?.version === 1, 'agent created', created.error);
  const read = await admin.GET('/v1/admin/agents/{agent_id}', { params: { path: { agent_id: agentId } } });
  check(read.data?.runner_id === runnerId, 'agent read', read.data);
  const replaced = await admin.PUT('/v1/admin/agents/{agent_id}', {
    params: { path: { agent_id: agentId } },
    body: { runner_id: runnerId, runner_config: { mode: 'echo' }, version: read.data!.version },
  });
  check(replaced.data?.version === 2, 'agent replaced', replaced.error);
  const agents = await admin.GET('/v1/admin/agents', { params: { query: { limit: 10 } } });
  check(agents.data?.items.some((a) => a.agent_id === agentId) === true, 'agent listed');
  step('agent');

  // Event → run.
  const conversationId = `contract-${Date.now()}`;
  const admitted = await admin.POST('/v1/events', {
    body: {
      agent_id: agentId,
      event: { event_type: 'message.received', source: 'api' },
      conversation: { conversation_id: conversationId },
      actor: { actor_type: 'user', actor_id: 'u1' },
      input: { text: 'hello from a generated client' },
    },
  });
  check(admitted.response.status === 202 && admitted.data?.disposition === 'started', 'event admitted', admitted.error);
  const runId = admitted.data!.run_id!;
  step('event');

  // SSE with a stream token (no Authorization), streamed; then the resume at the end is 204.
  const minted = await anonymous.POST('/v1/runs/{run_id}/stream-tokens', { params: { path: { run_id: runId } } });
  check(minted.response.status === 401, 'minting needs a key', minted.response.status);
  const token = await admin.POST('/v1/runs/{run_id}/stream-tokens', { params: { path: { run_id: runId } } });
  check(token.response.status === 201 && token.data?.run_id === runId, 'stream token minted', token.error);
  const stream = await anonymous.GET('/v1/runs/{run_id}/events', {
    params: { path: { run_id: runId }, query: { stream_token: token.data!.token } },
    parseAs: 'stream',
  });
  check(stream.response.status === 200, 'stream opened', stream.response.status);
  check(stream.response.headers.get('content-type')?.startsWith('text/event-stream') === true, 'event-stream type');
  const got = frames(await readAll(stream.data!));
  const last = got[got.length - 1];
  check(last?.event === 'run.completed' && last.data.type === 'run.completed', 'terminal frame', last);
  check(
    got.every(
      (f, i) => f.id === i + 1 && f.data.sequence === f.id && f.data.run_id === runId && f.event === f.data.type,
    ),
    'frames numbered and named by result type',
    got.map((f) => [f.id, f.event]),
  );
  const resumed = await admin.GET('/v1/runs/{run_id}/events', {
    params: { path: { run_id: runId }, header: { 'Last-Event-ID': String(last.id) } },
    parseAs: 'stream',
  });
  check(resumed.response.status === 204, 'resume at the end is 204', resumed.response.status);
  const missing = await admin.GET('/v1/runs/{run_id}/events', {
    params: { path: { run_id: '0b6c6c1e-9a43-4d55-9c1c-3c1f3f7a2f10' } },
    parseAs: 'stream',
  });
  check(
    missing.response.status === 404 && missing.response.headers.get('content-type')?.includes('json') === true,
    'stream 404 is JSON',
  );
  step('sse');

  // Run views: the run, the list with a status list filter, cancel after the end (typed 409).
  const run = await admin.GET('/v1/runs/{run_id}', { params: { path: { run_id: runId } } });
  check(run.data?.status === 'completed' && run.data.error === null, 'run completed', run.data);
  const usage: Schemas['RunDto']['usage'] = run.data!.usage;
  check(usage === null || typeof usage.total_tokens === 'number' || usage.total_tokens == null, 'usage typed', usage);
  const listed = await admin.GET('/v1/runs', {
    params: { query: { agent_id: agentId, status: ['completed', 'failed'], limit: 5 } },
  });
  check(listed.data?.items.some((r) => r.run_id === runId) === true, 'runs listed by a status list', listed.error);
  const none = await admin.GET('/v1/runs', { params: { query: { agent_id: agentId, status: ['running', 'queued'] } } });
  check(none.data?.items.length === 0, 'status list filters', none.data);
  const cancel = await admin.POST('/v1/runs/{run_id}/cancel', { params: { path: { run_id: runId } }, body: {} });
  check(
    cancel.response.status === 409 && cancel.error?.error.code === 'conflict',
    'cancel after the end',
    cancel.error,
  );
  const bad = await admin.GET('/v1/runs/{run_id}', { params: { path: { run_id: 'not-a-uuid' } } });
  check(bad.response.status === 400 && bad.error?.error.details.field === 'run_id', '400 names the field', bad.error);
  step('run');

  // Transcript: the user message and the assistant answer, with attachment_refs and metadata.
  let items: Schemas['TranscriptItemDto'][] = [];
  for (let i = 0; i < 100 && items.length < 2; i++) {
    const page = await admin.GET('/v1/conversations/{conversation_id}/transcript', {
      params: { path: { conversation_id: conversationId }, query: { order: 'oldest' } },
    });
    items = page.data?.items ?? [];
    if (items.length < 2) {
      await sleep(50);
    }
  }
  check(items.map((i) => i.role).join() === 'user,assistant', 'transcript', items);
  check(Array.isArray(items[0].attachment_refs) && items[0].metadata.actor_id === 'u1', 'user item typed', items[0]);
  check(items[1].metadata.run_id === runId, 'assistant item names its run', items[1].metadata);
  step('transcript');

  // Admin views.
  const authz = await admin.GET('/v1/admin/runs/{run_id}/authorization', { params: { path: { run_id: runId } } });
  check(authz.data?.hash_verified === true, 'authorization snapshot verifies', authz.data);
  const audit = await admin.GET('/v1/admin/runs/{run_id}/audit', { params: { path: { run_id: runId } } });
  check(Array.isArray(audit.data?.items), 'audit log', audit.error);
  const tools = await admin.GET('/v1/admin/tools');
  check(tools.data?.some((t) => t.source === 'builtin') === true, 'tools', tools.error);
  const sources = await admin.GET('/v1/admin/tools/sources');
  check(Array.isArray(sources.data), 'tool sources', sources.error);
  const models = await admin.GET('/v1/admin/models');
  check(Array.isArray(models.data?.items), 'models', models.error);
  const kbs = await admin.GET('/v1/admin/knowledge-bases');
  check(Array.isArray(kbs.data?.items), 'knowledge bases', kbs.error);
  const keys = await admin.GET('/v1/admin/api-keys');
  check(keys.data?.some((k) => k.role === 'admin') === true, 'api keys', keys.error);
  step('admin views');

  // Clean up through the API.
  runner.kill();
  const removed = await admin.DELETE('/v1/admin/agents/{agent_id}', { params: { path: { agent_id: agentId } } });
  check(removed.response.status === 204, 'agent deleted', removed.error);
  const gone = await admin.DELETE('/v1/admin/plugins/{author}/{name}', {
    params: { path: { author: 'contract', name: 'echo' } },
  });
  check(gone.response.status === 204, 'plugin deleted', gone.error);
  step('cleanup');
}

const children: ChildProcess[] = [];
walk(children)
  .then(
    () => process.stdout.write('walk complete\n'),
    (e: unknown) => {
      process.stderr.write(`walk failed: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exitCode = 1;
    },
  )
  .finally(() => children.forEach((c) => c.kill()));
