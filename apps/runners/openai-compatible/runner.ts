import OpenAI, { APIError } from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { defineRunner, type JsonObject, type RunContext, type RunIO, type Usage } from '@runner-host/runner-sdk';
import { configError, historyMessages, readConfig } from '../common/config';

/*
 * The OpenAI-compatible reference runner (docs/reference-runners.md#openai-compatible-runner):
 * any `/chat/completions` endpoint as a runner. It streams the endpoint's deltas, keeps the
 * conversation's history from the host's history API, offers the host tools this run was granted
 * to the endpoint as functions (every call goes through the host and is reported as tool.call.*),
 * and answers follow-ups steered into the run in the same run.
 */

export const OPENAI_CONFIG_SCHEMA = [
  {
    type: 'string',
    name: 'base_url',
    required: true,
    label: { en_US: 'Base URL' },
    description: { en_US: 'The endpoint base, e.g. https://api.openai.com/v1 (…/chat/completions is appended).' },
  },
  { type: 'string', name: 'model', required: true, label: { en_US: 'Model name' } },
  {
    type: 'string',
    name: 'api_key_env',
    default: 'OPENAI_API_KEY',
    label: { en_US: 'API key variable' },
    description: { en_US: "Name of the runner process's environment variable that holds the key ('' : no key)." },
  },
  { type: 'text', name: 'system_prompt', default: '', label: { en_US: 'System prompt' } },
  { type: 'integer', name: 'history_limit', default: 20, label: { en_US: 'History messages' } },
  { type: 'integer', name: 'max_tool_rounds', default: 4, label: { en_US: 'Tool rounds per turn' } },
  { type: 'boolean', name: 'stream_usage', default: true, label: { en_US: 'Ask for usage on the stream' } },
  { type: 'integer', name: 'steer_wait_ms', default: 0, label: { en_US: 'Wait for follow-ups (ms)' } },
];

interface OpenAIConfig {
  base_url: string;
  model: string;
  api_key_env: string;
  system_prompt: string;
  history_limit: number;
  max_tool_rounds: number;
  stream_usage: boolean;
  steer_wait_ms: number;
}

export function openaiConfig(
  config: JsonObject,
  env: NodeJS.ProcessEnv = process.env,
): OpenAIConfig & { apiKey: string } {
  const c = readConfig<OpenAIConfig>(config, OPENAI_CONFIG_SCHEMA);
  if (!/^https?:\/\/[^\s]+$/.test(c.base_url)) {
    throw configError('base_url', 'must be an http(s) URL');
  }
  if (c.model.trim() === '') {
    throw configError('model', 'must not be empty');
  }
  for (const field of ['history_limit', 'max_tool_rounds', 'steer_wait_ms'] as const) {
    if (c[field] < 0) {
      throw configError(field, 'must be 0 or more');
    }
  }
  let apiKey = 'no-key';
  if (c.api_key_env !== '') {
    const value = env[c.api_key_env];
    if (!value) {
      throw configError('api_key_env', `the environment variable ${c.api_key_env} is not set in the runner's process`);
    }
    apiKey = value;
  }
  return { ...c, apiKey };
}

/** Host tools the run was granted, as OpenAI function tools. */
function toolsOf(ctx: RunContext): ChatCompletionTool[] {
  return (ctx.resources?.tools ?? [])
    .filter((t) => t.operations.includes('call'))
    .map((t) => ({
      type: 'function',
      function: {
        name: t.tool_name,
        description: t.description,
        parameters: t.parameters ?? { type: 'object', properties: {} },
      },
    }));
}

function usageOf(u: OpenAI.CompletionUsage | null | undefined): Usage | undefined {
  return u
    ? { prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens, total_tokens: u.total_tokens }
    : undefined;
}

interface Round {
  text: string;
  finishReason: string;
  usage?: Usage;
  toolCalls: { id: string; name: string; arguments: string }[];
}

/** One streamed completion: deltas go out as they arrive. */
async function streamRound(
  client: OpenAI,
  c: OpenAIConfig,
  messages: ChatCompletionMessageParam[],
  tools: ChatCompletionTool[],
  io: RunIO,
): Promise<Round> {
  const stream = await client.chat.completions.create(
    {
      model: c.model,
      messages,
      stream: true,
      ...(c.stream_usage ? { stream_options: { include_usage: true } } : {}),
      ...(tools.length > 0 ? { tools } : {}),
    },
    { signal: io.signal },
  );
  const round: Round = { text: '', finishReason: 'stop', toolCalls: [] };
  for await (const chunk of stream) {
    round.usage = usageOf(chunk.usage) ?? round.usage;
    const choice = chunk.choices[0];
    if (!choice) {
      continue;
    }
    const piece = choice.delta?.content;
    if (piece) {
      round.text += piece;
      await io.delta(piece);
    }
    for (const call of choice.delta?.tool_calls ?? []) {
      const slot = (round.toolCalls[call.index] ??= { id: '', name: '', arguments: '' });
      slot.id = call.id ?? slot.id;
      slot.name += call.function?.name ?? '';
      slot.arguments += call.function?.arguments ?? '';
    }
    round.finishReason = choice.finish_reason ?? round.finishReason;
  }
  return round;
}

function parseArguments(raw: string): JsonObject {
  try {
    const parsed: unknown = JSON.parse(raw || '{}');
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as JsonObject) : {};
  } catch {
    return {};
  }
}

/** Answers one turn: completions until the endpoint stops asking for tools (at most max_tool_rounds tool rounds). */
async function answerTurn(
  client: OpenAI,
  c: OpenAIConfig,
  messages: ChatCompletionMessageParam[],
  tools: ChatCompletionTool[],
  io: RunIO,
): Promise<Round> {
  for (let round = 0; ; round++) {
    const offered = round < c.max_tool_rounds ? tools : [];
    const answer = await streamRound(client, c, messages, offered, io);
    if (answer.toolCalls.length === 0) {
      return answer;
    }
    messages.push({
      role: 'assistant',
      content: answer.text || null,
      tool_calls: answer.toolCalls.map((t) => ({
        id: t.id,
        type: 'function',
        function: { name: t.name, arguments: t.arguments },
      })),
    });
    for (const call of answer.toolCalls) {
      // A refused or failing tool is reported (tool.call.completed with its error) and told to the model.
      const content = await io
        .toolCall(call.name, parseArguments(call.arguments), { id: call.id })
        .then((result) => JSON.stringify(result))
        .catch((e: unknown) => {
          if (io.signal.aborted) {
            throw e;
          }
          return JSON.stringify({ error: e instanceof Error ? e.message : String(e) });
        });
      messages.push({ role: 'tool', tool_call_id: call.id, content });
    }
  }
}

export function upstreamFailure(e: unknown): { error: string; code: string; retryable: boolean } | null {
  if (e instanceof APIError) {
    const status: number = typeof e.status === 'number' ? e.status : 0;
    return {
      error: `upstream answered ${status || 'without a status'}: ${e.message}`,
      code: 'runner.upstream_error',
      retryable: status === 0 || status === 429 || status >= 500,
    };
  }
  return null;
}

export const openaiCompatible = defineRunner({
  name: 'default',
  label: { en_US: 'OpenAI-compatible endpoint' },
  description: { en_US: 'Any /chat/completions endpoint as a runner (streaming, host tools, steering).' },
  capabilities: { streaming: true, tool_calling: true, steering: true, interrupt: true },
  permissions: { tools: ['detail', 'call'], history: ['page'] },
  configSchema: OPENAI_CONFIG_SCHEMA,
  async run(ctx, io) {
    let c: ReturnType<typeof openaiConfig>;
    try {
      c = openaiConfig(ctx.config);
    } catch (e) {
      return io.failed((e as Error).message, { code: 'runner.config_invalid' });
    }
    const client = new OpenAI({ baseURL: c.base_url, apiKey: c.apiKey, maxRetries: 0 });
    const messages: ChatCompletionMessageParam[] = [];
    if (c.system_prompt) {
      messages.push({ role: 'system', content: c.system_prompt });
    }
    for (const m of await historyMessages(ctx, io, c.history_limit)) {
      messages.push({ role: m.role, content: m.content });
    }
    const tools = toolsOf(ctx);
    let last: Round | undefined;
    try {
      for await (const turn of io.turns({ waitMs: c.steer_wait_ms })) {
        messages.push({ role: 'user', content: turn.text });
        last = await answerTurn(client, c, messages, tools, io);
        messages.push({ role: 'assistant', content: last.text });
        await io.message({ role: 'assistant', content: last.text }, last.usage);
      }
    } catch (e) {
      const failure = upstreamFailure(e);
      if (failure && !io.signal.aborted) {
        return io.failed(failure.error, { code: failure.code, retryable: failure.retryable });
      }
      throw e;
    }
    await io.completed({ finishReason: last?.finishReason ?? 'stop' });
  },
});
