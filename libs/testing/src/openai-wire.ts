import type { ScriptedCompletion, ScriptedUsage } from './openai-scripts';

/*
 * The chat-completions wire format, as OpenAI sends it: a `chat.completion` object, or the
 * `chat.completion.chunk` objects of a stream (each sent as `data: <json>\n\n`).
 */

type Json = Record<string, unknown>;

export interface ChatRequestBody {
  model?: string;
  messages?: unknown[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  tools?: unknown[];
}

let counter = 0;

function pieces(text: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) {
    out.push(text.slice(i, i + size));
  }
  return out;
}

function split(text: string, n: number): string[] {
  if (text === '' || n <= 1) {
    return [text];
  }
  const size = Math.ceil(text.length / n);
  return pieces(text, size);
}

export function usageOf(c: ScriptedCompletion, req: ChatRequestBody): ScriptedUsage | null {
  if (c.usage !== undefined) {
    return c.usage;
  }
  const prompt = Math.ceil(JSON.stringify(req.messages ?? []).length / 4);
  const completion =
    Math.ceil((c.content ?? c.deltas?.join('') ?? '').length / 4) +
    (c.tool_calls ?? []).reduce((n, t) => n + Math.ceil((t.name.length + t.arguments.length) / 4), 0);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

function finishOf(c: ScriptedCompletion): string {
  return c.finish_reason ?? ((c.tool_calls ?? []).length > 0 ? 'tool_calls' : 'stop');
}

export function completionJson(c: ScriptedCompletion, req: ChatRequestBody): Json {
  const content = c.content ?? c.deltas?.join('') ?? null;
  const toolCalls = (c.tool_calls ?? []).map((t) => ({
    id: t.id,
    type: 'function',
    function: { name: t.name, arguments: t.arguments },
  }));
  const usage = usageOf(c, req);
  return {
    id: `chatcmpl-scripted-${++counter}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: req.model ?? 'scripted',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: toolCalls.length > 0 && !content ? null : content,
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
          ...(c.reasoning_content !== undefined ? { reasoning_content: c.reasoning_content } : {}),
          refusal: null,
        },
        logprobs: null,
        finish_reason: finishOf(c),
      },
    ],
    ...(usage ? { usage } : {}),
    system_fingerprint: 'fp_scripted',
  };
}

/** The chunk objects of a streamed completion, in order (without `[DONE]`). */
export function completionChunks(c: ScriptedCompletion, req: ChatRequestBody): Json[] {
  const id = `chatcmpl-scripted-${++counter}`;
  const created = Math.floor(Date.now() / 1000);
  const model = req.model ?? 'scripted';
  const chunk = (delta: Json, finish: string | null = null): Json => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    system_fingerprint: 'fp_scripted',
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  });
  const out: Json[] = [chunk({ role: 'assistant', content: '', refusal: null })];
  for (const r of c.reasoning_content ? pieces(c.reasoning_content, 8) : []) {
    out.push(chunk({ reasoning_content: r }));
  }
  for (const d of c.deltas ?? pieces(c.content ?? '', 4)) {
    out.push(chunk({ content: d }));
  }
  (c.tool_calls ?? []).forEach((t, index) => {
    out.push(chunk({ tool_calls: [{ index, id: t.id, type: 'function', function: { name: t.name, arguments: '' } }] }));
    for (const a of split(t.arguments, c.argument_pieces ?? 3)) {
      out.push(chunk({ tool_calls: [{ index, function: { arguments: a } }] }));
    }
  });
  out.push(chunk({}, finishOf(c)));
  const usage = usageOf(c, req);
  if (req.stream_options?.include_usage && usage) {
    out.push({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      system_fingerprint: 'fp_scripted',
      choices: [],
      usage,
    });
  }
  return out;
}

export const sse = (data: unknown): string => `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;

/** The server's own rerank scoring: the share of query words a document contains. */
export function scoreDocuments(query: string, documents: string[]): { index: number; relevance_score: number }[] {
  const words = query.toLowerCase().split(/\W+/).filter(Boolean);
  return documents.map((doc, index) => {
    const text = doc.toLowerCase();
    const hits = words.filter((w) => text.includes(w)).length;
    return { index, relevance_score: words.length === 0 ? 0 : Math.round((hits / words.length) * 1e4) / 1e4 };
  });
}
