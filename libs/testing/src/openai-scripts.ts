/*
 * What the scripted OpenAI-compatible server answers, one script per request. A completion script
 * is rendered in the wire format the request asks for: a chat.completion JSON object, or SSE
 * chat.completion.chunk events (content deltas, tool-call deltas split across chunks, finish
 * chunk, usage chunk when stream_options.include_usage, `data: [DONE]`).
 */

export interface ScriptedUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  [extra: string]: unknown;
}

export interface ScriptedToolCall {
  id: string;
  name: string;
  arguments: string;
}

export interface ScriptedCompletion {
  /** The full text; streamed as `deltas` when given, else in pieces of about 4 characters. */
  content?: string;
  deltas?: string[];
  reasoning_content?: string;
  tool_calls?: ScriptedToolCall[];
  /** Pieces each tool call's arguments are split into on the stream (default 3). */
  argument_pieces?: number;
  /** Default: 'tool_calls' when there are tool calls, else 'stop'. */
  finish_reason?: string;
  /** Default: counted from the request and the answer; null: the server reports none. */
  usage?: ScriptedUsage | null;
}

export type MalformedMode =
  /** A chunk that is not JSON. */
  | 'bad_json'
  /** Content, then the connection closes cleanly without a finish chunk or [DONE]. */
  | 'no_finish'
  /** Content, then `data: {"error": …}` inside the stream. */
  | 'error_event'
  /** Content, then the socket is destroyed. */
  | 'reset';

export type Script =
  | { type: 'completion'; completion: ScriptedCompletion; delay_ms?: number; chunk_delay_ms?: number }
  | { type: 'error'; status: number; body: unknown; headers?: Record<string, string> }
  | { type: 'malformed'; mode: MalformedMode }
  /** Never answers (until the client gives up). */
  | { type: 'hang' }
  /** A `/rerank` answer: explicit results, or the server's own scoring when absent. */
  | { type: 'rerank'; results?: { index: number; relevance_score: number }[]; usage?: unknown; raw?: unknown };

const errorBody = (message: string, type: string, code: string | null, param: string | null = null) => ({
  error: { message, type, param, code },
});

/** Script builders with the bodies real providers send. */
export const scripts = {
  reply: (content: string, extra: Omit<ScriptedCompletion, 'content'> = {}): Script => ({
    type: 'completion',
    completion: { content, ...extra },
  }),
  completion: (
    completion: ScriptedCompletion,
    timing: { delay_ms?: number; chunk_delay_ms?: number } = {},
  ): Script => ({
    type: 'completion',
    completion,
    ...timing,
  }),
  toolCalls: (calls: ScriptedToolCall[], content = ''): Script => ({
    type: 'completion',
    completion: { content, tool_calls: calls },
  }),
  contextLengthExceeded: (limit = 8192, got = 9000): Script => ({
    type: 'error',
    status: 400,
    body: errorBody(
      `This model's maximum context length is ${limit} tokens. However, your messages resulted in ${got} tokens. Please reduce the length of the messages.`,
      'invalid_request_error',
      'context_length_exceeded',
      'messages',
    ),
  }),
  badRequest: (message = "Invalid value for 'temperature'.", param = 'temperature'): Script => ({
    type: 'error',
    status: 400,
    body: errorBody(message, 'invalid_request_error', null, param),
  }),
  rateLimited: (retryAfterSeconds = 2): Script => ({
    type: 'error',
    status: 429,
    headers: { 'retry-after': String(retryAfterSeconds) },
    body: errorBody(
      'Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.',
      'requests',
      'rate_limit_exceeded',
    ),
  }),
  quotaExceeded: (): Script => ({
    type: 'error',
    status: 429,
    body: errorBody(
      'You exceeded your current quota, please check your plan and billing details.',
      'insufficient_quota',
      'insufficient_quota',
    ),
  }),
  serverError: (status = 500): Script => ({
    type: 'error',
    status,
    body: errorBody('The server had an error while processing your request. Sorry about that!', 'server_error', null),
  }),
  /** A 401 whose message echoes the key it got, as some providers do (the host must not pass it on). */
  unauthorized: (echoedKey = ''): Script => ({
    type: 'error',
    status: 401,
    body: errorBody(
      `Incorrect API key provided: ${echoedKey}. You can find your API key at https://platform.openai.com/account/api-keys.`,
      'invalid_request_error',
      'invalid_api_key',
    ),
  }),
  forbidden: (): Script => ({
    type: 'error',
    status: 403,
    body: errorBody('You are not allowed to sample from this model', 'invalid_request_error', 'model_not_allowed'),
  }),
  notFound: (model = 'missing-model'): Script => ({
    type: 'error',
    status: 404,
    body: errorBody(
      `The model \`${model}\` does not exist or you do not have access to it.`,
      'invalid_request_error',
      'model_not_found',
    ),
  }),
  malformed: (mode: MalformedMode): Script => ({ type: 'malformed', mode }),
  hang: (): Script => ({ type: 'hang' }),
  rerank: (scores?: number[], usage?: unknown): Script => ({
    type: 'rerank',
    results: scores?.map((relevance_score, index) => ({ index, relevance_score })),
    usage,
  }),
  rerankRaw: (raw: unknown): Script => ({ type: 'rerank', raw }),
};

export { errorBody };
