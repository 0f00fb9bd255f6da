import { createHash } from 'node:crypto';
import { Tiktoken } from 'js-tiktoken/lite';
import type {
  ChatCompletionContentPart,
  ChatCompletionFunctionTool,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import { DRIVE_DEFAULTS, driveCount, LruCounts, textUnits, upperEstimate, type DriveOptions } from './bounded-bpe';
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
 *
 * Every text is counted by the bounded BPE of bounded-bpe.ts (long pieces in chunks, huge texts
 * by their UTF-8 bytes); `requestAsync` yields to the event loop between slices and answers the
 * upper estimate (UTF-8 bytes for every text) past its time budget; counts of messages seen
 * before come from a bounded LRU keyed by the tokenizer and a hash of the message.
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

interface Encoding {
  enc: Tiktoken;
  /** The encoding's pre-tokenizer pattern (RegExp source). */
  pattern: string;
}

const encodings = new Map<TokenizerName, Encoding>();

function loadEncoding(name: TokenizerName): Encoding {
  let e = encodings.get(name);
  if (!e) {
    const mod = RANKS[name]() as TiktokenBPE | { default: TiktokenBPE };
    const ranks = 'default' in mod ? mod.default : mod;
    e = { enc: new Tiktoken(ranks), pattern: ranks.pat_str };
    encodings.set(name, e);
  }
  return e;
}

/** The (cached) encoder of a tokenizer. */
export function encodingFor(name: TokenizerName): Tiktoken {
  return loadEncoding(name).enc;
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

/** Messages whose counts are kept (LRU): ~100 bytes each. */
export const MESSAGE_CACHE_ENTRIES = 10_000;
const messageCounts = new LruCounts(MESSAGE_CACHE_ENTRIES);

/** How a text is counted: bounded BPE, or its upper estimate (UTF-8 bytes). */
type TextCount = (this: void, s: string) => Generator<number>;

const byteUnits: TextCount = function* (s) {
  yield upperEstimate(s);
};

const sum = (units: Iterable<number>): number => {
  let n = 0;
  for (const u of units) {
    n += u;
  }
  return n;
};

export class TokenCounter {
  private readonly encoding: Encoding;
  private readonly funcInit: number;
  private readonly bpe: TextCount;

  constructor(private readonly name: TokenizerName) {
    this.encoding = loadEncoding(name);
    this.funcInit = name === 'o200k_base' ? 7 : 10;
    const { enc, pattern } = this.encoding;
    this.bpe = (s) => textUnits(enc, pattern, s);
  }

  /** Tokens of a plain string; special-token text counts as ordinary text, as a provider would. */
  text(s: string): number {
    return sum(this.bpe(s));
  }

  /** The request's tokens, counted on the event loop at once (small inputs, tests, benches). */
  request(messages: ChatCompletionMessageParam[], tools: ChatCompletionFunctionTool[]): number {
    return sum(this.requestUnits(messages, tools, this.bpe));
  }

  /**
   * The request's tokens, counted in slices with turns of the event loop between them; past the
   * time budget the upper estimate answers (`estimated`).
   */
  async requestAsync(
    messages: ChatCompletionMessageParam[],
    tools: ChatCompletionFunctionTool[],
    opts: DriveOptions = DRIVE_DEFAULTS,
  ): Promise<{ tokens: number; estimated: boolean }> {
    return driveCount(this.requestUnits(messages, tools, this.bpe), () => this.upper(messages, tools), opts);
  }

  /** The upper estimate of a request: the same rules with every text counted as its UTF-8 bytes. */
  upper(messages: ChatCompletionMessageParam[], tools: ChatCompletionFunctionTool[]): number {
    return sum(this.requestUnits(messages, tools, byteUnits, false));
  }

  messages(messages: ChatCompletionMessageParam[]): number {
    return sum(this.messageUnits(messages, this.bpe));
  }

  tools(tools: ChatCompletionFunctionTool[]): number {
    return sum(this.toolUnits(tools, this.bpe));
  }

  private *requestUnits(
    messages: ChatCompletionMessageParam[],
    tools: ChatCompletionFunctionTool[],
    text: TextCount,
    cached = true,
  ): Generator<number> {
    yield* this.messageUnits(messages, text, cached);
    yield* this.toolUnits(tools, text);
  }

  private *messageUnits(messages: ChatCompletionMessageParam[], text: TextCount, cached = true): Generator<number> {
    for (const m of messages) {
      if (!cached) {
        yield* this.oneMessage(m, text);
        continue;
      }
      // A count is stored only once the message was counted to its end (a count cut by the
      // time budget closes this generator before the set).
      const key = createHash('sha1').update(this.name).update('\0').update(JSON.stringify(m)).digest('base64');
      const hit = messageCounts.get(key);
      if (hit !== undefined) {
        yield hit;
        continue;
      }
      let n = 0;
      for (const u of this.oneMessage(m, text)) {
        n += u;
        yield u;
      }
      messageCounts.set(key, n);
    }
    yield REPLY_PRIMING;
  }

  private *oneMessage(m: ChatCompletionMessageParam, text: TextCount): Generator<number> {
    yield PER_MESSAGE;
    yield* text(m.role);
    yield* this.content(m.content, text);
    if ('name' in m && typeof m.name === 'string') {
      yield PER_NAME;
      yield* text(m.name);
    }
    if (m.role === 'assistant') {
      for (const tc of m.tool_calls ?? []) {
        if (tc.type === 'function') {
          yield PER_TOOL_CALL;
          yield* text(tc.function.name);
          yield* text(tc.function.arguments);
        }
      }
    }
    if (m.role === 'tool') {
      yield* text(m.tool_call_id);
    }
  }

  private *toolUnits(tools: ChatCompletionFunctionTool[], text: TextCount): Generator<number> {
    if (tools.length === 0) {
      return;
    }
    for (const { function: f } of tools) {
      yield this.funcInit;
      yield* text(`${f.name}:${trimDot(f.description ?? '')}`);
      const props = (f.parameters?.properties ?? {}) as Record<string, Record<string, unknown>>;
      const keys = Object.keys(props);
      if (keys.length > 0) {
        yield TOOLS.propInit;
        for (const key of keys) {
          const p = props[key] ?? {};
          yield TOOLS.propKey;
          if (Array.isArray(p.enum)) {
            yield TOOLS.enumInit;
            for (const item of p.enum) {
              yield TOOLS.enumItem;
              yield* text(String(item));
            }
          }
          const type = Array.isArray(p.type) ? p.type.join(',') : typeof p.type === 'string' ? p.type : '';
          const desc = typeof p.description === 'string' ? trimDot(p.description) : '';
          yield* text(`${key}:${type}:${desc}`);
          if (p.properties || p.items) {
            yield* text(JSON.stringify({ properties: p.properties, items: p.items }));
          }
        }
      }
    }
    yield TOOLS.funcEnd;
  }

  private *content(content: ChatCompletionMessageParam['content'], text: TextCount): Generator<number> {
    if (content === null || content === undefined) {
      return;
    }
    if (typeof content === 'string') {
      yield* text(content);
      return;
    }
    for (const part of content as ChatCompletionContentPart[]) {
      if (part.type === 'text') {
        yield* text(part.text);
      } else if (part.type === 'image_url') {
        yield part.image_url.detail === 'low' ? IMAGE_LOW : IMAGE_HIGH;
      }
    }
  }
}

function trimDot(s: string): string {
  return s.endsWith('.') ? s.slice(0, -1) : s;
}
