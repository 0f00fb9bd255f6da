import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { ScriptedOpenAIServer, scripts } from '@libs/testing';
import { DemoHost, type ResultEvent } from './demo-host';
import { auditTable, say, section, snapshotSummary, StreamPrinter } from './print';

/*
 * `npm run demo` (README.md, Demo): the host with SQLite in a temp dir, the scripted OpenAI-compatible
 * model server (in this process, real HTTP, no network), and the built-in local agent; then one
 * conversation that shows streaming, a tool call, a steered follow-up, a cancel, a tool call that
 * waits for a person's approval (docs/interactions.md), and the admin views of a run's
 * authorization snapshot and audit log. Offline, well under a minute.
 *
 *   npm run demo            (builds, then runs dist/scripts/demo/main.js)
 *
 * Exits 0 when every step did what it shows, 1 (with the reason and the host log) otherwise.
 */

const AGENT = 'demo';
/** The same agent, but `current_time` runs only once a person approved the call. */
const CAREFUL = 'demo-careful';
const CONVERSATION = `demo-${randomBytes(3).toString('hex')}`;
const KEY = `sk-demo-${randomBytes(12).toString('hex')}`;

interface Step {
  runId: string;
  events: ResultEvent[];
}

async function main(): Promise<void> {
  const started = performance.now();
  const model = await ScriptedOpenAIServer.start();
  model.defaultCompletion = { content: 'Noted.' };
  const host = await DemoHost.start({ DEMO_MODEL_KEY: KEY, SECRET_ENV_ALLOWLIST: 'DEMO_MODEL_KEY' });
  let ok = false;
  try {
    section('Setup');
    say(`host      ${host.url}  (SQLite in ${host.dataDir})`);
    say(`model     scripted OpenAI-compatible server at ${model.baseUrl}`);
    await host.expect(201, 'POST', '/v1/admin/models', {
      model_id: 'demo-model',
      kind: 'chat',
      provider: 'openai',
      base_url: model.baseUrl,
      api_key_env: 'DEMO_MODEL_KEY',
      model_name: 'scripted-demo',
      context_window: 128000,
      abilities: { tool_calling: true, vision: false, streaming: true },
      tokenizer: 'o200k_base',
    });
    await host.expect(201, 'POST', '/v1/admin/agents', {
      agent_id: AGENT,
      runner_id: 'builtin:local-agent/default',
      runner_config: { model: { primary: 'demo-model', fallbacks: [] } },
      resource_policy: { allowed_model_ids: ['demo-model'], allowed_tool_names: ['current_time'] },
      concurrency_policy: { mode: 'steer' },
    });
    await host.expect(201, 'POST', '/v1/admin/agents', {
      agent_id: CAREFUL,
      runner_id: 'builtin:local-agent/default',
      runner_config: { model: { primary: 'demo-model', fallbacks: [] }, 'approval-tools': ['current_time'] },
      resource_policy: { allowed_model_ids: ['demo-model'], allowed_tool_names: ['current_time'] },
      delivery_policy: { enable_interactions: true },
    });
    const runners = await host.expect<{ runner_id: string; kind: string; state: string }[]>(
      200,
      'GET',
      '/v1/admin/runners',
    );
    for (const r of runners) {
      say(`runner    ${r.runner_id} (${r.kind}, ${r.state})`);
    }
    say(`agent     ${AGENT} → builtin:local-agent/default, may use demo-model and the tool current_time`);
    say(`agent     ${CAREFUL} → the same, but current_time needs a person's approval`);

    section('1. Streaming');
    model.chat(
      scripts.completion(
        { deltas: ['Hello! ', 'I am the ', 'built-in ', 'local agent ', 'of this host. ', 'Ask me anything.'] },
        { chunk_delay_ms: 120 },
      ),
    );
    const first = await turn(host, 'Hi! Who are you?');
    expectStatus(first, 'run.completed');

    section('2. A tool call');
    model.chat(
      scripts.toolCalls([{ id: 'call_time', name: 'current_time', arguments: '{"timezone":"UTC"}' }]),
      scripts.reply('It is just past the time the tool told me — see above.'),
    );
    const second = await turn(host, 'What time is it?');
    expectStatus(second, 'run.completed');
    if (!second.events.some((e) => e.type === 'tool.call.completed')) {
      throw new Error('the agent did not call the tool');
    }

    section('3. A steered follow-up');
    model.chat(
      scripts.completion(
        { tool_calls: [{ id: 'call_plan', name: 'current_time', arguments: '{}' }] },
        { delay_ms: 1500 },
      ),
      scripts.reply('Your day: standup at 10, lunch at 12 — and I will remind you to call Bob.'),
    );
    const asked = model.requests.length;
    let disposition = '';
    const third = await turn(host, 'Plan my day.', async (runId) => {
      await waitForRequest(model, asked + 1);
      const follow = await post(host, 'Also remind me to call Bob.');
      disposition = follow.disposition;
      say(`you>   Also remind me to call Bob.   (sent while run ${short(runId)} works: ${follow.disposition})`);
    });
    expectStatus(third, 'run.completed');
    const sawFollowUp = JSON.stringify(model.requests.at(-1)?.body.messages ?? []).includes('call Bob');
    if (disposition !== 'steered' || !sawFollowUp) {
      throw new Error(`the follow-up was not steered into the run (disposition ${disposition})`);
    }
    say('The follow-up reached the running agent at its next turn.');

    section('4. A cancel');
    model.chat(
      scripts.completion(
        { deltas: Array.from({ length: 60 }, (_, i) => `${['Once', 'upon', 'a', 'time'][i % 4]} `) },
        { chunk_delay_ms: 100 },
      ),
    );
    let cancelled = false;
    const fourth = await turn(host, 'Tell me a very long story.', undefined, async (runId, e) => {
      if (!cancelled && e.type === 'message.delta' && e.id >= 5) {
        cancelled = true;
        await host.expect(200, 'POST', `/v1/runs/${runId}/cancel`, { reason: 'the user left' });
        process.stdout.write('  [cancel sent]');
      }
    });
    expectStatus(fourth, 'run.failed');

    section('5. A tool approval');
    await approval(host, model);

    section(`6. Admin views of run ${short(second.runId)} (the tool call)`);
    snapshotSummary(await host.expect(200, 'GET', `/v1/admin/runs/${second.runId}/authorization`));
    auditTable(
      (await host.expect<{ items: any[] }>(200, 'GET', `/v1/admin/runs/${second.runId}/audit?limit=50`)).items,
    );

    section('Done');
    say(`${model.requests.length} model requests, 6 runs, ${((performance.now() - started) / 1000).toFixed(1)} s`);
    ok = true;
  } finally {
    await host.stop();
    await model.close();
    if (!ok) {
      process.stderr.write(`--- host log ---\n${host.log()}\n`);
    }
    host.remove();
  }
}

/**
 * The careful agent wants a tool: its run asks for approval (an `interaction.request` op with a
 * one-time token) and ends; the platform approves with the token; the next run executes the call
 * once and answers. The conversation's timeline shows both.
 */
async function approval(host: DemoHost, model: ScriptedOpenAIServer): Promise<void> {
  const conversation = `${CONVERSATION}-careful`;
  model.chat(
    scripts.toolCalls([{ id: 'call_careful', name: 'current_time', arguments: '{"timezone":"UTC"}' }]),
    scripts.reply('Approved and done: the time is above.'),
  );
  const asking = await turn(
    host,
    'What time is it? (to the careful agent)',
    undefined,
    undefined,
    CAREFUL,
    conversation,
  );
  expectStatus(asking, 'run.completed');
  const request = (await host.deliveries(asking.runId)).find((o) => o.op === 'interaction.request');
  if (!request || asking.events.some((e) => e.type === 'tool.call.started')) {
    throw new Error('the careful agent did not ask for approval before calling the tool');
  }
  say(`asked  ${request.payload.request.title}: ${request.payload.request.description.split('\n').at(-1)}`);
  say(
    `       token ${request.payload.callback_token.slice(0, 9)}…, expires ${new Date(request.payload.expires_at * 1000).toISOString()}`,
  );
  const submitted = await host.expect<{ run_id: string; disposition: string }>(
    202,
    'POST',
    `/v1/interactions/${request.payload.id}/submit`,
    { callback_token: request.payload.callback_token, action_id: 'approve' },
  );
  say(`you>   [approve]   (the submission ${submitted.disposition} run ${short(submitted.run_id)})`);
  const printer = new StreamPrinter();
  const events = await host.follow(submitted.run_id, (e) => printer.show(e));
  printer.end(events.at(-1), short(submitted.run_id));
  if (events.filter((e) => e.type === 'tool.call.completed').length !== 1) {
    throw new Error('the approved call did not run exactly once');
  }
  const again = await host.api('POST', `/v1/interactions/${request.payload.id}/submit`, {
    callback_token: request.payload.callback_token,
    action_id: 'approve',
  });
  say(`a second submission of the token: ${again.status}`);
  const timeline = await host.expect<{ entries: { type: string; run_id: string | null }[] }>(
    200,
    'GET',
    `/v1/admin/conversations/${conversation}/timeline`,
  );
  say(`timeline  ${timeline.entries.map((e) => e.type).join(' → ')}`);
}

async function post(
  host: DemoHost,
  text: string,
  agent = AGENT,
  conversation = CONVERSATION,
): Promise<{ run_id: string; disposition: string }> {
  return host.expect(202, 'POST', '/v1/events', {
    agent_id: agent,
    event: { event_type: 'message.received', source: 'api' },
    conversation: { conversation_id: conversation },
    actor: { actor_type: 'user', actor_id: 'demo-user' },
    input: { text },
  });
}

/** One user message: posts it, prints the run's results as they stream, answers them. */
async function turn(
  host: DemoHost,
  text: string,
  during?: (runId: string) => Promise<void>,
  onEvent?: (runId: string, e: ResultEvent) => Promise<void>,
  agent = AGENT,
  conversation = CONVERSATION,
): Promise<Step> {
  say(`you>   ${text}`);
  const { run_id: runId } = await post(host, text, agent, conversation);
  const printer = new StreamPrinter();
  const side = during?.(runId);
  const events = await host.follow(runId, async (e) => {
    printer.show(e);
    await onEvent?.(runId, e);
  });
  await side;
  printer.end(events.at(-1), short(runId));
  return { runId, events };
}

function expectStatus(step: Step, type: string): void {
  const last = step.events.at(-1);
  if (last?.type !== type) {
    throw new Error(
      `run ${step.runId} ended with ${last?.type ?? 'nothing'} (${JSON.stringify(last?.data)}), not ${type}`,
    );
  }
}

async function waitForRequest(model: ScriptedOpenAIServer, n: number): Promise<void> {
  const until = Date.now() + 10_000;
  while (model.requests.length < n && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 20));
  }
}

const short = (id: string) => id.slice(0, 8);

main().then(
  () => process.exit(0),
  (e: unknown) => {
    process.stderr.write(`demo failed: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  },
);
