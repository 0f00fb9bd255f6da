import { randomBytes } from 'node:crypto';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import type { JsonObject } from './message-mapping';
import { usageJson } from './model-types';

/*
 * Provider stream chunks → Protocol v1 MessageChunks. Each chunk with visible text becomes one
 * MessageChunk {content: the new text, msg_sequence}; tool-call fragments are assembled per
 * provider index (id and name from the first fragment, arguments concatenated) and delivered
 * complete on the final chunk {is_final: true, all_content: the whole text, tool_calls,
 * provider_specific_fields.finish_reason}, so a consumer never has to merge partial calls.
 * (all_content is sent once, on the final chunk: on every chunk it would make a stream's bytes
 * grow with the square of its length.)
 */

const OPEN = /<think\b[^>]*>/i;
const CLOSE = /<\/think>/i;
const CLOSE_LEN = '</think>'.length;

/**
 * Streaming `remove_think`: drops `<think…>…</think>` blocks and the whitespace after them (and
 * leading whitespace), holding back text that may be the start of a tag split across chunks. An
 * unterminated block at the end of the stream is dropped.
 */
export class ThinkFilter {
  private buf = '';
  private inThink = false;
  private skipWs = true;

  push(text: string): string {
    this.buf += text;
    let out = '';
    for (;;) {
      if (this.skipWs) {
        this.buf = this.buf.trimStart();
        if (this.buf === '') {
          return out;
        }
        this.skipWs = false;
      }
      if (this.inThink) {
        const m = CLOSE.exec(this.buf);
        if (!m) {
          this.buf = this.buf.slice(-(CLOSE_LEN - 1));
          return out;
        }
        this.buf = this.buf.slice(m.index + CLOSE_LEN);
        this.inThink = false;
        this.skipWs = true;
        continue;
      }
      const m = OPEN.exec(this.buf);
      if (m) {
        out += this.buf.slice(0, m.index);
        this.buf = this.buf.slice(m.index + m[0].length);
        this.inThink = true;
        continue;
      }
      const lt = this.buf.lastIndexOf('<');
      const tail = lt >= 0 ? this.buf.slice(lt) : '';
      if (tail && ('<think'.startsWith(tail.toLowerCase()) || /^<think(\s[^>]*)?$/i.test(tail))) {
        out += this.buf.slice(0, lt);
        this.buf = tail;
      } else {
        out += this.buf;
        this.buf = '';
      }
      return out;
    }
  }

  flush(): string {
    const rest = this.inThink ? '' : this.buf;
    this.buf = '';
    return rest;
  }
}

interface PartialCall {
  id?: string;
  type: string;
  name: string;
  arguments: string;
}

/** Tool-call fragments keyed by provider index; a different id at a used index starts a new call. */
export class ToolCallAssembler {
  private readonly calls: PartialCall[] = [];
  private readonly byIndex = new Map<number, PartialCall>();

  push(deltas: ChatCompletionChunk.Choice.Delta.ToolCall[]): void {
    deltas.forEach((d, position) => {
      const index = typeof d.index === 'number' ? d.index : position;
      let call = this.byIndex.get(index);
      if (!call || (d.id && call.id && d.id !== call.id)) {
        call = { type: 'function', name: '', arguments: '' };
        this.calls.push(call);
        this.byIndex.set(index, call);
      }
      if (d.id) {
        call.id = d.id;
      }
      if (d.type) {
        call.type = d.type;
      }
      if (d.function?.name) {
        call.name = d.function.name;
      }
      if (d.function?.arguments) {
        call.arguments += d.function.arguments;
      }
    });
  }

  result(): JsonObject[] {
    return this.calls.map((c) => ({
      id: c.id ?? `call_${randomBytes(12).toString('hex')}`,
      type: c.type,
      function: { name: c.name, arguments: c.arguments },
    }));
  }
}

/** One provider stream, chunk by chunk. */
export class StreamAssembler {
  private seq = 0;
  private all = '';
  private finishReason: string | null = null;
  private readonly think: ThinkFilter | null;
  private readonly tools = new ToolCallAssembler();
  /** The provider's usage (from the trailing usage chunk), as it sent it. */
  usage: JsonObject | null = null;

  constructor(private readonly removeThink: boolean) {
    this.think = removeThink ? new ThinkFilter() : null;
  }

  /** Whether the provider said why it stopped (a stream without it is truncated). */
  get finished(): boolean {
    return this.finishReason !== null;
  }

  /** A provider chunk → the MessageChunk to send on, or null when it carries nothing visible. */
  push(chunk: ChatCompletionChunk): JsonObject | null {
    if (chunk.usage) {
      this.usage = usageJson(chunk.usage);
    }
    const choice = chunk.choices?.[0];
    if (!choice) {
      return null;
    }
    if (choice.finish_reason) {
      this.finishReason = choice.finish_reason;
    }
    const delta = (choice.delta ?? {}) as ChatCompletionChunk.Choice.Delta & { reasoning_content?: unknown };
    if (delta.tool_calls) {
      this.tools.push(delta.tool_calls);
    }
    const raw = typeof delta.content === 'string' ? delta.content : '';
    const text = this.think ? this.think.push(raw) : raw;
    const reasoning = !this.removeThink && typeof delta.reasoning_content === 'string' ? delta.reasoning_content : '';
    if (text === '' && reasoning === '') {
      return null;
    }
    this.all += text;
    return {
      role: 'assistant',
      content: text,
      ...(reasoning ? { reasoning_content: reasoning } : {}),
      is_final: false,
      msg_sequence: ++this.seq,
    };
  }

  /** The final chunk: text the think filter held back, the complete tool calls, the finish reason. */
  final(): JsonObject {
    const text = this.think?.flush() ?? '';
    this.all += text;
    const toolCalls = this.tools.result();
    return {
      role: 'assistant',
      content: text,
      all_content: this.all,
      ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
      is_final: true,
      msg_sequence: ++this.seq,
      provider_specific_fields: { finish_reason: this.finishReason },
    };
  }
}
