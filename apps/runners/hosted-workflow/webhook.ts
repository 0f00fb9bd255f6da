import { defineRunner, type Json, type JsonObject, type RunContext, type RunIO } from '@runner-host/runner-sdk';
import { configError, readConfig } from '../common/config';
import { bodyChunks } from '../common/body-chunks';

/*
 * The n8n-style webhook runner (docs/reference-runners.md#n8n-style-webhooks): each turn POSTs
 * a JSON body built from `body_template` to the webhook and reads the answer from the response
 * at `response_field` (a dotted path; the first item when the response is an array, as n8n's
 * "all incoming items"), or, with `response_mode: stream`, from n8n's streamed response
 * (newline-delimited JSON, `{"type":"item","content":"…"}` pieces). The default template is
 * what n8n's Chat Trigger reads: `{action: "sendMessage", sessionId, chatInput}`.
 */

/** What a template string may name: `{{text}}` etc. */
export const PLACEHOLDERS = ['text', 'conversation_id', 'actor_id', 'run_id', 'event_id'] as const;
type Placeholder = (typeof PLACEHOLDERS)[number];

export const WEBHOOK_CONFIG_SCHEMA = [
  { type: 'string', name: 'url', required: true, label: { en_US: 'Webhook URL' } },
  {
    type: 'object',
    name: 'body_template',
    default: { action: 'sendMessage', sessionId: '{{conversation_id}}', chatInput: '{{text}}' },
    label: { en_US: 'Request body template' },
    description: { en_US: `JSON; strings may name ${PLACEHOLDERS.map((p) => `{{${p}}}`).join(', ')}` },
  },
  { type: 'string', name: 'response_field', default: 'output', label: { en_US: 'Answer field (dotted path)' } },
  {
    type: 'select',
    name: 'response_mode',
    default: 'json',
    options: [
      { name: 'json', label: { en_US: 'JSON response' } },
      { name: 'stream', label: { en_US: 'Streamed (n8n streaming response)' } },
    ],
    label: { en_US: 'Response mode' },
  },
  { type: 'string', name: 'auth_header', default: '', label: { en_US: 'Auth header name' } },
  {
    type: 'string',
    name: 'auth_env',
    default: '',
    label: { en_US: 'Auth header value variable' },
    description: { en_US: "Name of the runner process's environment variable holding the header's value." },
  },
  { type: 'integer', name: 'steer_wait_ms', default: 0, label: { en_US: 'Wait for follow-ups (ms)' } },
];

interface WebhookConfig {
  url: string;
  body_template: JsonObject;
  response_field: string;
  response_mode: 'json' | 'stream';
  auth_header: string;
  auth_env: string;
  steer_wait_ms: number;
}

const PLACEHOLDER = /\{\{\s*([A-Za-z_]+)\s*\}\}/g;

function checkTemplate(value: Json, path: string): void {
  if (typeof value === 'string') {
    for (const [, name] of value.matchAll(PLACEHOLDER)) {
      if (!(PLACEHOLDERS as readonly string[]).includes(name)) {
        throw configError('body_template', `${path || 'the body'} names an unknown placeholder {{${name}}}`);
      }
    }
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => checkTemplate(v, `${path}[${i}]`));
  } else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      checkTemplate(v, path ? `${path}.${k}` : k);
    }
  }
}

export function webhookConfig(
  config: JsonObject,
  env: NodeJS.ProcessEnv = process.env,
): WebhookConfig & { headers: Record<string, string> } {
  const c = readConfig<WebhookConfig>(config, WEBHOOK_CONFIG_SCHEMA);
  if (!/^https?:\/\/\S+$/.test(c.url)) {
    throw configError('url', 'must be an http(s) URL');
  }
  checkTemplate(c.body_template, '');
  if (!/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(c.response_field)) {
    throw configError('response_field', 'must be a dotted path of field names, e.g. output or data.text');
  }
  if (c.steer_wait_ms < 0) {
    throw configError('steer_wait_ms', 'must be 0 or more');
  }
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (c.auth_header) {
    const value = c.auth_env ? env[c.auth_env] : undefined;
    if (!value) {
      throw configError(
        'auth_env',
        `must name an environment variable set in the runner's process (auth_header is ${c.auth_header})`,
      );
    }
    headers[c.auth_header.toLowerCase()] = value;
  }
  return { ...c, headers };
}

/** The template with its placeholders filled (a string that is one placeholder becomes that value). */
export function fillTemplate(template: Json, values: Record<Placeholder, string>): Json {
  if (typeof template === 'string') {
    return template.replace(PLACEHOLDER, (_, name: string) => values[name as Placeholder] ?? '');
  }
  if (Array.isArray(template)) {
    return template.map((v) => fillTemplate(v, values));
  }
  if (template && typeof template === 'object') {
    return Object.fromEntries(Object.entries(template).map(([k, v]) => [k, fillTemplate(v, values)]));
  }
  return template;
}

/** The value at a dotted path (the first item of an array response first). */
export function pick(body: unknown, path: string): unknown {
  let value: unknown = Array.isArray(body) ? body[0] : body;
  for (const key of path.split('.')) {
    value = value && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined;
  }
  return value;
}

export class WebhookError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function* lines(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of bodyChunks(body)) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n')) >= 0) {
      yield buffer.slice(0, end);
      buffer = buffer.slice(end + 1);
    }
  }
  yield buffer + decoder.decode();
}

async function call(c: ReturnType<typeof webhookConfig>, ctx: RunContext, text: string, io: RunIO): Promise<string> {
  const body = fillTemplate(c.body_template, {
    text,
    conversation_id: ctx.conversation?.conversation_id ?? ctx.run_id,
    actor_id: ctx.actor?.actor_id ?? '',
    run_id: ctx.run_id,
    event_id: ctx.event?.event_id ?? '',
  });
  const res = await fetch(c.url, { method: 'POST', headers: c.headers, body: JSON.stringify(body), signal: io.signal });
  if (!res.ok || !res.body) {
    throw new WebhookError(res.status, `webhook answered ${res.status}: ${(await res.text()).slice(0, 500)}`);
  }
  if (c.response_mode === 'stream') {
    let answer = '';
    for await (const line of lines(res.body)) {
      if (!line.trim()) {
        continue;
      }
      const piece = JSON.parse(line) as { type?: string; content?: unknown };
      if (piece.type === 'item' && typeof piece.content === 'string') {
        answer += piece.content;
        await io.delta(piece.content);
      } else if (piece.type === 'error') {
        throw new WebhookError(502, `webhook stream error: ${JSON.stringify(piece.content ?? null)}`);
      }
    }
    return answer;
  }
  const raw = await res.text();
  let parsed: unknown = raw;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return raw; // a plain-text answer ("Respond to Webhook" with text)
  }
  const value = pick(parsed, c.response_field);
  if (typeof value === 'string') {
    return value;
  }
  if (value === undefined) {
    throw new WebhookError(502, `webhook response has no ${c.response_field} (runner_config.response_field)`);
  }
  return JSON.stringify(value);
}

export const webhook = defineRunner({
  name: 'webhook',
  label: { en_US: 'Workflow webhook (n8n-style)' },
  description: { en_US: 'POSTs each message to a workflow webhook and answers with a field of its response.' },
  capabilities: { streaming: true, steering: true, interrupt: true },
  permissions: {},
  configSchema: WEBHOOK_CONFIG_SCHEMA,
  async run(ctx, io) {
    let c: ReturnType<typeof webhookConfig>;
    try {
      c = webhookConfig(ctx.config);
    } catch (e) {
      return io.failed((e as Error).message, { code: 'runner.config_invalid' });
    }
    try {
      for await (const turn of io.turns({ waitMs: c.steer_wait_ms })) {
        await io.message({ role: 'assistant', content: await call(c, ctx, turn.text, io) });
      }
    } catch (e) {
      if (io.signal.aborted) {
        throw e;
      }
      const status = e instanceof WebhookError ? e.status : 0;
      return io.failed(e instanceof WebhookError ? e.message : `webhook request failed: ${(e as Error).message}`, {
        code: 'runner.upstream_error',
        retryable: status === 0 || status === 429 || status >= 500,
      });
    }
  },
});
