import { Tiktoken } from 'js-tiktoken/lite';
import type {
  ChatCompletionContentPart,
  ChatCompletionFunctionTool,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import type { TokenizerName } from './model-types';

/*
 * count_tokens: the input tokens a chat-completions request bills, counted locally with the
 * js-tiktoken encoding the model names (`tokenizer`). The rules are OpenAI's published ones
 * (openai-cookbook "How to count tokens with tiktoken"): 3 tokens per message + its role,
 * content and name (+1 for a name), 3 to prime the reply; tools as the model sees them
 * (7 tokens per function with o200k_base, 10 otherwise, `name:description`, 3 + `key:type:
 * description` per property, enums, 12 to close). Where OpenAI publishes nothing the count is an
 * estimate, by design on the high side: an image is 85 tokens at detail "low" and 765 otherwise
 * (a 1024×1024 high-detail image); an assistant tool call is 3 + its name + its arguments;
 * nested parameter schemas count their JSON.
 */

type TiktokenBPE = ConstructorParameters<typeof Tiktoken>[0];

/* eslint-disable @typescript-eslint/no-require-imports -- each rank file (MBs) is loaded only when a model names it */
const RANKS: Record<TokenizerName, () => unknown> = {
  o200k_base: () => require('js-tiktoken/ranks/o200k_base') as unknown,
  cl100k_base: () => require('js-tiktoken/ranks/cl100k_base') as unknown,
  p50k_base: () => require('js-tiktoken/ranks/p50k_base') as unknown,
  r50k_base: () => require('js-tiktoken/ranks/r50k_base') as unknown,
};
/* eslint-enable @typescript-eslint/no-require-imports */

const encodings = new Map<TokenizerName, Tiktoken>();

/** The (cached) encoder of a tokenizer. */
export function encodingFor(name: TokenizerName): Tiktoken {
  let enc = encodings.get(name);
  if (!enc) {
    const mod = RANKS[name]() as TiktokenBPE | { default: TiktokenBPE };
    enc = new Tiktoken('default' in mod ? mod.default : mod);
    encodings.set(name, enc);
  }
  return enc;
}

/**
 * Builds an encoder ahead of its first count (building o200k_base takes over a second of CPU), on
 * the next turn of the event loop: at boot and when a model naming it is registered.
 */
export function warmTokenizer(name: TokenizerName | null): void {
  if (name && !encodings.has(name)) {
    setImmediate(() => {
      try {
        encodingFor(name);
      } catch {
        // Built (or failing, with its error) on first use instead.
      }
    }).unref();
  }
}

const PER_MESSAGE = 3;
const PER_NAME = 1;
const REPLY_PRIMING = 3;
const PER_TOOL_CALL = 3;
const IMAGE_LOW = 85;
const IMAGE_HIGH = 765;
const TOOLS = { propInit: 3, propKey: 3, enumInit: -3, enumItem: 3, funcEnd: 12 };

export class TokenCounter {
  private readonly enc: Tiktoken;
  private readonly funcInit: number;

  constructor(name: TokenizerName) {
    this.enc = encodingFor(name);
    this.funcInit = name === 'o200k_base' ? 7 : 10;
  }

  /** Tokens of a plain string; special-token text counts as ordinary text, as a provider would. */
  text(s: string): number {
    return s === '' ? 0 : this.enc.encode(s, [], []).length;
  }

  request(messages: ChatCompletionMessageParam[], tools: ChatCompletionFunctionTool[]): number {
    return this.messages(messages) + this.tools(tools);
  }

  messages(messages: ChatCompletionMessageParam[]): number {
    let n = 0;
    for (const m of messages) {
      n += PER_MESSAGE + this.text(m.role) + this.content(m.content);
      if ('name' in m && typeof m.name === 'string') {
        n += PER_NAME + this.text(m.name);
      }
      if (m.role === 'assistant') {
        for (const tc of m.tool_calls ?? []) {
          if (tc.type === 'function') {
            n += PER_TOOL_CALL + this.text(tc.function.name) + this.text(tc.function.arguments);
          }
        }
      }
      if (m.role === 'tool') {
        n += this.text(m.tool_call_id);
      }
    }
    return n + REPLY_PRIMING;
  }

  tools(tools: ChatCompletionFunctionTool[]): number {
    if (tools.length === 0) {
      return 0;
    }
    let n = 0;
    for (const { function: f } of tools) {
      n += this.funcInit + this.text(`${f.name}:${trimDot(f.description ?? '')}`);
      const props = (f.parameters?.properties ?? {}) as Record<string, Record<string, unknown>>;
      const keys = Object.keys(props);
      if (keys.length > 0) {
        n += TOOLS.propInit;
        for (const key of keys) {
          const p = props[key] ?? {};
          n += TOOLS.propKey;
          if (Array.isArray(p.enum)) {
            n += TOOLS.enumInit;
            for (const item of p.enum) {
              n += TOOLS.enumItem + this.text(String(item));
            }
          }
          const type = Array.isArray(p.type) ? p.type.join(',') : typeof p.type === 'string' ? p.type : '';
          const desc = typeof p.description === 'string' ? trimDot(p.description) : '';
          n += this.text(`${key}:${type}:${desc}`);
          if (p.properties || p.items) {
            n += this.text(JSON.stringify({ properties: p.properties, items: p.items }));
          }
        }
      }
    }
    return n + TOOLS.funcEnd;
  }

  private content(content: ChatCompletionMessageParam['content']): number {
    if (content === null || content === undefined) {
      return 0;
    }
    if (typeof content === 'string') {
      return this.text(content);
    }
    let n = 0;
    for (const part of content as ChatCompletionContentPart[]) {
      if (part.type === 'text') {
        n += this.text(part.text);
      } else if (part.type === 'image_url') {
        n += part.image_url.detail === 'low' ? IMAGE_LOW : IMAGE_HIGH;
      }
    }
    return n;
  }
}

function trimDot(s: string): string {
  return s.endsWith('.') ? s.slice(0, -1) : s;
}
