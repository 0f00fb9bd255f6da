import type { ChatMessage, ContentElement, ToolCall } from '../host-port';
import { isMediaElement } from './tokens';

/*
 * The provider sanitizer (docs/local-agent.md#sanitizing-and-the-per-turn-split): run on every
 * context slice before every model call so a provider never sees an orphan tool result, a tool call
 * without its result, or content blocks it does not understand (reasoning, provider tool_result
 * blocks).
 */

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool']);

const isText = (el: ContentElement) => el.type === 'text' && typeof el.text === 'string' && el.text !== '';

/**
 * Only text and media blocks survive. The host sends media only in user messages, and only
 * images there: elsewhere media are dropped, and a user's file element becomes a `[file:name]`
 * text (its bytes reach the model through tools, not inline), so a request is never refused.
 */
function cleanContent(content: ChatMessage['content'], role: string): ChatMessage['content'] {
  if (!Array.isArray(content)) {
    return content;
  }
  const kept: ContentElement[] = [];
  for (const el of content) {
    if (!el || typeof el !== 'object' || typeof el.type !== 'string') {
      continue;
    }
    if (isText(el)) {
      kept.push(el);
    } else if (role === 'user' && isMediaElement(el)) {
      const name = typeof el.file_name === 'string' && el.file_name !== '' ? el.file_name : 'unnamed';
      kept.push(el.type.startsWith('file') ? { type: 'text', text: `[file:${name}]` } : el);
    }
  }
  return kept.length === 0 ? '' : kept;
}

const hasContent = (c: ChatMessage['content']) =>
  typeof c === 'string' ? c !== '' : Array.isArray(c) ? c.length > 0 : false;

function cleanCalls(calls: ChatMessage['tool_calls']): ToolCall[] | null {
  if (!Array.isArray(calls)) {
    return null;
  }
  const kept = calls.filter(
    (c) =>
      c && typeof c.id === 'string' && c.id !== '' && typeof c.function?.name === 'string' && c.function.name !== '',
  );
  return kept.length === 0 ? null : kept;
}

function cleanMessage(m: ChatMessage): ChatMessage | null {
  if (!m || typeof m !== 'object' || !ROLES.has(m.role)) {
    return null;
  }
  // The host's chat mapping knows no "developer" role: it is a system instruction there.
  const role = m.role === 'developer' ? 'system' : m.role;
  const out: ChatMessage = { ...m, role, content: cleanContent(m.content, role) };
  if (m.role === 'tool') {
    if (typeof m.tool_call_id !== 'string' || m.tool_call_id === '') {
      return null;
    }
    return out;
  }
  const calls = m.role === 'assistant' ? cleanCalls(m.tool_calls) : null;
  if (calls) {
    out.tool_calls = calls;
  } else if ('tool_calls' in out) {
    out.tool_calls = null;
  }
  if (!hasContent(out.content) && !calls) {
    return null;
  }
  return out;
}

/** Sanitized copy of `messages`: cleaned messages, tool calls paired with their results. */
export function sanitizeMessages(messages: readonly ChatMessage[]): ChatMessage[] {
  const cleaned = messages.map(cleanMessage).filter((m): m is ChatMessage => m !== null);
  const out: ChatMessage[] = [];
  let i = 0;
  while (i < cleaned.length) {
    const m = cleaned[i];
    if (m.role === 'tool') {
      i += 1; // not directly after an assistant with tool calls: an orphan
      continue;
    }
    if (m.role !== 'assistant' || !m.tool_calls) {
      out.push(m);
      i += 1;
      continue;
    }
    const ids = new Set(m.tool_calls.map((c) => c.id));
    const results: ChatMessage[] = [];
    const seen = new Set<string>();
    let j = i + 1;
    for (; j < cleaned.length && cleaned[j].role === 'tool'; j++) {
      const id = cleaned[j].tool_call_id!;
      if (ids.has(id) && !seen.has(id)) {
        seen.add(id);
        results.push(cleaned[j]);
      }
    }
    if (results.length === 0) {
      if (hasContent(m.content)) {
        out.push({ ...m, tool_calls: null });
      }
    } else {
      out.push({ ...m, tool_calls: m.tool_calls.filter((c) => seen.has(c.id)) }, ...results);
    }
    i = j;
  }
  return out;
}
