import { defineRunner, type JsonObject, type RunContext, type RunIO, type Usage } from '@runner-host/runner-sdk';
import { configError, readConfig } from '../common/config';
import { sseMessages } from '../common/sse';

/*
 * The Dify chat-app runner (docs/reference-runners.md#dify-chat-apps): each turn is one
 * `POST <base_url>/chat-messages` with `response_mode: streaming`; the SSE events `message` /
 * `agent_message` stream as deltas, `message_end` closes the answer with its usage, `error`
 * fails the run. Dify's `conversation_id` is kept in the host's conversation state
 * (`dify.conversation_id`), so every later message of the conversation, in this run or a later
 * one, continues the same Dify conversation. Cancel stops the Dify task
 * (`POST /chat-messages/<task_id>/stop`).
 */

export const DIFY_STATE_KEY = 'dify.conversation_id';

export const DIFY_CONFIG_SCHEMA = [
  {
    type: 'string',
    name: 'base_url',
    required: true,
    label: { en_US: 'API base URL' },
    description: { en_US: 'The app API base, e.g. https://api.dify.ai/v1' },
  },
  {
    type: 'string',
    name: 'api_key_env',
    required: true,
    label: { en_US: 'API key variable' },
    description: { en_US: "Name of the runner process's environment variable holding the app's API key." },
  },
  { type: 'object', name: 'inputs', default: {}, label: { en_US: 'App inputs' } },
  { type: 'integer', name: 'steer_wait_ms', default: 0, label: { en_US: 'Wait for follow-ups (ms)' } },
];

interface DifyConfig {
  base_url: string;
  api_key_env: string;
  inputs: JsonObject;
  steer_wait_ms: number;
}

export function difyConfig(config: JsonObject, env: NodeJS.ProcessEnv = process.env): DifyConfig & { apiKey: string } {
  const c = readConfig<DifyConfig>(config, DIFY_CONFIG_SCHEMA);
  if (!/^https?:\/\/\S+$/.test(c.base_url)) {
    throw configError('base_url', 'must be an http(s) URL');
  }
  if (c.steer_wait_ms < 0) {
    throw configError('steer_wait_ms', 'must be 0 or more');
  }
  const apiKey = env[c.api_key_env];
  if (!apiKey) {
    throw configError('api_key_env', `the environment variable ${c.api_key_env} is not set in the runner's process`);
  }
  return { ...c, base_url: c.base_url.replace(/\/+$/, ''), apiKey };
}

/** A failure Dify reported (an HTTP error body or an `error` event). */
export class DifyError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(`dify answered ${status} ${code}: ${message}`);
  }
}

interface Answer {
  text: string;
  usage?: Usage;
  conversationId: string;
}

function usageOf(metadata: unknown): Usage | undefined {
  const u = (metadata as { usage?: Record<string, unknown> } | undefined)?.usage;
  if (!u || typeof u.total_tokens !== 'number') {
    return undefined;
  }
  return {
    prompt_tokens: typeof u.prompt_tokens === 'number' ? u.prompt_tokens : null,
    completion_tokens: typeof u.completion_tokens === 'number' ? u.completion_tokens : null,
    total_tokens: u.total_tokens,
  };
}

async function errorOf(res: Response): Promise<DifyError> {
  const text = await res.text();
  try {
    const body = JSON.parse(text) as { code?: string; message?: string };
    return new DifyError(res.status, body.code ?? 'error', body.message ?? text);
  } catch {
    return new DifyError(res.status, 'error', text.slice(0, 500));
  }
}

/** One chat message: streams the answer's deltas, returns the whole answer. */
async function chatMessage(
  c: ReturnType<typeof difyConfig>,
  query: string,
  conversationId: string,
  user: string,
  io: RunIO,
): Promise<Answer> {
  const headers = { authorization: `Bearer ${c.apiKey}`, 'content-type': 'application/json' };
  const res = await fetch(`${c.base_url}/chat-messages`, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      inputs: c.inputs,
      query,
      response_mode: 'streaming',
      conversation_id: conversationId,
      user,
      files: [],
    }),
    signal: io.signal,
  });
  if (!res.ok || !res.body) {
    throw await errorOf(res);
  }
  let taskId: string | null = null;
  // Cancel: the fetch is aborted with the run's signal; Dify is also told to stop the task.
  const stop = () => {
    if (taskId) {
      void fetch(`${c.base_url}/chat-messages/${encodeURIComponent(taskId)}/stop`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ user }),
      }).catch(() => undefined);
    }
  };
  io.signal.addEventListener('abort', stop, { once: true });
  const answer: Answer = { text: '', conversationId };
  try {
    for await (const sse of sseMessages(res.body)) {
      if (sse.event === 'ping' || sse.data === '') {
        continue;
      }
      const e = JSON.parse(sse.data) as Record<string, unknown>;
      taskId = typeof e.task_id === 'string' ? e.task_id : taskId;
      if (typeof e.conversation_id === 'string' && e.conversation_id) {
        answer.conversationId = e.conversation_id;
      }
      switch (e.event) {
        case 'message':
        case 'agent_message':
          if (typeof e.answer === 'string' && e.answer) {
            answer.text += e.answer;
            await io.delta(e.answer);
          }
          break;
        case 'message_replace':
          // Dify replaces the answer (content moderation): what was streamed cannot be taken back, the message is the replacement.
          answer.text = typeof e.answer === 'string' ? e.answer : answer.text;
          break;
        case 'message_end':
          answer.usage = usageOf(e.metadata);
          return answer;
        case 'error':
          throw new DifyError(
            typeof e.status === 'number' ? e.status : 500,
            typeof e.code === 'string' ? e.code : 'error',
            typeof e.message === 'string' ? e.message : 'stream error',
          );
        default:
          break; // workflow_*, node_*, agent_thought, message_file, tts_*: not part of the answer
      }
    }
  } finally {
    io.signal.removeEventListener('abort', stop);
  }
  throw new DifyError(502, 'incomplete_stream', 'the stream ended without message_end');
}

/** The Dify user: the actor, so that Dify's per-user conversation lists stay per user. */
function userOf(ctx: RunContext): string {
  return ctx.actor?.actor_id ? `${ctx.actor.actor_type}:${ctx.actor.actor_id}` : 'runner-host';
}

export const dify = defineRunner({
  name: 'dify',
  label: { en_US: 'Dify chat app' },
  description: { en_US: 'A Dify chat / agent / chatflow app over its streaming chat-messages API.' },
  capabilities: { streaming: true, steering: true, interrupt: true },
  permissions: {},
  configSchema: DIFY_CONFIG_SCHEMA,
  async run(ctx, io) {
    let c: ReturnType<typeof difyConfig>;
    try {
      c = difyConfig(ctx.config);
    } catch (e) {
      return io.failed((e as Error).message, { code: 'runner.config_invalid' });
    }
    const stored = ctx.state?.conversation?.[DIFY_STATE_KEY];
    let conversationId = typeof stored === 'string' ? stored : '';
    const user = userOf(ctx);
    try {
      for await (const turn of io.turns({ waitMs: c.steer_wait_ms })) {
        let answer: Answer;
        try {
          answer = await chatMessage(c, turn.text, conversationId, user, io);
        } catch (e) {
          // A conversation Dify no longer knows (deleted, another app): start a new one.
          if (!(e instanceof DifyError && e.status === 404 && conversationId && !io.signal.aborted)) {
            throw e;
          }
          answer = await chatMessage(c, turn.text, '', user, io);
        }
        if (answer.conversationId !== conversationId && ctx.conversation?.conversation_id) {
          conversationId = answer.conversationId;
          await io.state('conversation', DIFY_STATE_KEY, conversationId);
        }
        await io.message({ role: 'assistant', content: answer.text }, answer.usage);
      }
    } catch (e) {
      if (io.signal.aborted) {
        throw e;
      }
      const failure = e instanceof DifyError ? e : null;
      return io.failed(failure ? failure.message : `dify request failed: ${(e as Error).message}`, {
        code: 'runner.upstream_error',
        retryable: !failure || failure.status === 429 || failure.status >= 500,
      });
    }
  },
});
