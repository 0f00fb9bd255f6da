import type {
  ChatCompletionContentPart,
  ChatCompletionFunctionTool,
  ChatCompletionMessage,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import { DomainError, messageSchema, zodRefusal, type ProtocolMessage } from '@libs/protocol';
import { extraField, type ModelAbilities } from './model-types';

/*
 * Protocol v1 messages and tool definitions ↔ chat completions. Roles user/system/assistant/tool
 * map one to one (command and plugin have no chat-completions equivalent and are refused);
 * content parts text / image_url / image_base64 (→ data-URL image_url); assistant tool_calls and
 * tool results by tool_call_id. Anything that cannot be sent is refused naming its field.
 */

export type JsonObject = Record<string, unknown>;

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

const invalid = (field: string, rule: string, details: JsonObject = {}) =>
  new DomainError('invalid_argument', `${field}: ${rule}`, { field, ...details });

/** MIME type of base64 image bytes from their magic number (PNG when unknown). */
function imageMime(base64: string): string {
  const head = Buffer.from(base64.slice(0, 24), 'base64');
  if (head[0] === 0xff && head[1] === 0xd8) {
    return 'image/jpeg';
  }
  if (head.subarray(0, 4).toString('latin1') === 'GIF8') {
    return 'image/gif';
  }
  if (head.subarray(0, 4).toString('latin1') === 'RIFF' && head.subarray(8, 12).toString('latin1') === 'WEBP') {
    return 'image/webp';
  }
  return 'image/png';
}

function imagePart(el: JsonObject, field: string): ChatCompletionContentPart {
  if (el.type === 'image_base64') {
    const data = el.image_base64;
    if (typeof data !== 'string' || data === '') {
      throw invalid(`${field}.image_base64`, 'must be base64 image data or a data: URL');
    }
    const url = data.startsWith('data:') ? data : `data:${imageMime(data)};base64,${data}`;
    return { type: 'image_url', image_url: { url } };
  }
  const raw = el.image_url;
  const spec = (typeof raw === 'string' ? { url: raw } : raw) as { url?: unknown; detail?: unknown } | undefined;
  if (typeof spec?.url !== 'string' || !/^(https?:|data:)/i.test(spec.url)) {
    throw invalid(`${field}.image_url.url`, 'must be an http(s) or data: URL');
  }
  const detail = spec.detail;
  if (detail !== undefined && detail !== 'auto' && detail !== 'low' && detail !== 'high') {
    throw invalid(`${field}.image_url.detail`, 'must be auto, low or high');
  }
  return { type: 'image_url', image_url: { url: spec.url, ...(detail ? { detail } : {}) } };
}

function contentParts(content: unknown[], field: string, abilities: ModelAbilities): ChatCompletionContentPart[] {
  return content.map((raw, j) => {
    const el = raw as JsonObject;
    const at = `${field}[${j}]`;
    switch (el.type) {
      case 'text':
        if (typeof el.text !== 'string') {
          throw invalid(`${at}.text`, 'must be a string');
        }
        return { type: 'text', text: el.text };
      case 'image_url':
      case 'image_base64':
        if (!abilities.vision) {
          throw invalid(at, 'this model does not accept images (abilities.vision is false)', {
            reason: 'vision_unsupported',
          });
        }
        return imagePart(el, at);
      default:
        throw invalid(
          `${at}.type`,
          `"${String(el.type)}" cannot be sent to a chat model (text, image_url, image_base64)`,
        );
    }
  });
}

/** Text of a message whose role accepts only text (system, assistant, tool). */
function textOnly(content: ProtocolMessage['content'], field: string): string | null {
  if (content === null || content === undefined || typeof content === 'string') {
    return content ?? null;
  }
  return content
    .map((el, j) => {
      if (el.type !== 'text' || typeof el.text !== 'string') {
        throw invalid(`${field}[${j}].type`, 'only text parts are allowed in this role');
      }
      return el.text;
    })
    .join('');
}

function toolCallsOf(msg: ProtocolMessage, field: string): ChatCompletionMessageFunctionToolCall[] | undefined {
  if (!msg.tool_calls || msg.tool_calls.length === 0) {
    return undefined;
  }
  return msg.tool_calls.map((tc, k) => {
    if (!tc.id) {
      throw invalid(`${field}.tool_calls[${k}].id`, 'is required');
    }
    return { id: tc.id, type: 'function', function: { name: tc.function.name, arguments: tc.function.arguments } };
  });
}

/** Protocol v1 messages → chat-completions messages. */
export function toChatMessages(messages: unknown[], abilities: ModelAbilities): ChatCompletionMessageParam[] {
  return (messages ?? []).map((raw, i) => {
    const field = `messages[${i}]`;
    const parsed = messageSchema.safeParse(raw);
    if (!parsed.success) {
      throw zodRefusal(parsed.error, field);
    }
    const msg = parsed.data;
    const name = msg.name ? { name: msg.name } : {};
    switch (msg.role) {
      case 'system':
        return { role: 'system', content: textOnly(msg.content, `${field}.content`) ?? '', ...name };
      case 'user':
        return {
          role: 'user',
          content: Array.isArray(msg.content)
            ? contentParts(msg.content, `${field}.content`, abilities)
            : (msg.content ?? ''),
          ...name,
        };
      case 'assistant': {
        const toolCalls = toolCallsOf(msg, field);
        return {
          role: 'assistant',
          content: textOnly(msg.content, `${field}.content`),
          ...(toolCalls ? { tool_calls: toolCalls } : {}),
          ...name,
        };
      }
      case 'tool':
        if (!msg.tool_call_id) {
          throw invalid(`${field}.tool_call_id`, 'is required for a tool message');
        }
        return {
          role: 'tool',
          tool_call_id: msg.tool_call_id,
          content: textOnly(msg.content, `${field}.content`) ?? '',
        };
      case 'command':
      case 'plugin':
        throw invalid(`${field}.role`, `"${msg.role}" cannot be sent to a chat model (system, user, assistant, tool)`);
    }
  });
}

/** Tool definitions: OpenAI `{type: 'function', function}` objects, or LLMTool `{name, description, parameters}`. */
export function toChatTools(tools: unknown[]): ChatCompletionFunctionTool[] {
  return (tools ?? []).map((raw, i) => {
    const field = `tools[${i}]`;
    const t = (raw ?? {}) as JsonObject;
    const fn = (t.type === 'function' && t.function && typeof t.function === 'object' ? t.function : t) as JsonObject;
    const at = fn === t ? field : `${field}.function`;
    if (typeof fn.name !== 'string' || !TOOL_NAME.test(fn.name)) {
      throw invalid(`${at}.name`, 'must be 1-64 letters, digits, "_" or "-"');
    }
    if (fn.description !== undefined && fn.description !== null && typeof fn.description !== 'string') {
      throw invalid(`${at}.description`, 'must be a string');
    }
    const parameters = fn.parameters ?? { type: 'object', properties: {} };
    if (typeof parameters !== 'object' || Array.isArray(parameters)) {
      throw invalid(`${at}.parameters`, 'must be a JSON schema object');
    }
    return {
      type: 'function',
      function: {
        name: fn.name,
        ...(typeof fn.description === 'string' ? { description: fn.description } : {}),
        parameters: parameters as JsonObject,
        ...(typeof fn.strict === 'boolean' ? { strict: fn.strict } : {}),
      },
    };
  });
}

const THINK_BLOCK = /<think\b[^>]*>[\s\S]*?<\/think>\s*/gi;

/** Removes `<think…>…</think>` blocks (and an orphan leading `…</think>`), then leading whitespace. */
export function stripThink(text: string): string {
  let out = text.replace(THINK_BLOCK, '');
  const close = out.search(/<\/think>/i);
  if (close >= 0 && !/<think\b/i.test(out.slice(0, close))) {
    out = out.slice(close + '</think>'.length);
  }
  return out.trimStart();
}

/** A chat-completions assistant message → a Protocol v1 Message. */
export function fromChatMessage(
  message: ChatCompletionMessage,
  finishReason: string | null,
  removeThink: boolean,
): JsonObject {
  const reasoning = extraField(message, 'reasoning_content');
  const content = typeof message.content === 'string' && removeThink ? stripThink(message.content) : message.content;
  const toolCalls = (message.tool_calls ?? []).flatMap((tc) =>
    tc.type === 'function'
      ? [{ id: tc.id, type: 'function', function: { name: tc.function.name, arguments: tc.function.arguments } }]
      : [],
  );
  return {
    role: 'assistant',
    content: content ?? null,
    ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
    ...(!removeThink && typeof reasoning === 'string' ? { reasoning_content: reasoning } : {}),
    provider_specific_fields: {
      finish_reason: finishReason,
      ...(message.refusal ? { refusal: message.refusal } : {}),
    },
  };
}
