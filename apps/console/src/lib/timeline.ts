import type { Schemas } from '../api/client';

export type RunResult = Schemas['RunResultDto'];

export interface Usage {
  prompt_tokens?: number | null;
  completion_tokens?: number | null;
  total_tokens?: number | null;
}

export type TimelineItem =
  | { kind: 'message'; key: string; role: string; text: string; done: boolean; sequence: number }
  | {
      kind: 'tool';
      key: string;
      tool_call_id: string;
      tool_name: string;
      parameters: unknown;
      result?: unknown;
      error?: string | null;
      done: boolean;
      sequence: number;
    }
  | { kind: 'terminal'; key: string; type: string; data: Record<string, unknown>; source: string; sequence: number }
  | { kind: 'other'; key: string; type: string; data: Record<string, unknown>; sequence: number };

export interface Timeline {
  items: TimelineItem[];
  usage: Usage | null;
  last: number;
  ended: boolean;
}

export const EMPTY_TIMELINE: Timeline = { items: [], usage: null, last: 0, ended: false };

/** Result types a stream names its frames by (EventSource listens to each: onmessage never fires). */
export const RESULT_TYPES = [
  'message.delta',
  'message.completed',
  'tool.call.started',
  'tool.call.completed',
  'artifact.created',
  'state.updated',
  'action.requested',
  'run.completed',
  'run.failed',
] as const;

function textOf(content: unknown): string {
  if (typeof content === 'string') {
    return content;
  }
  if (Array.isArray(content)) {
    return content
      .map((c) =>
        c && typeof c === 'object' && typeof (c as { text?: unknown }).text === 'string'
          ? (c as { text: string }).text
          : '',
      )
      .join('');
  }
  return '';
}

/**
 * Folds one result into the timeline: deltas are assembled into the open message (its text
 * replaced by `message.completed`), a tool call's start and completion are one item, the usage
 * is the last one reported, and a terminal ends it. Results at or below `last` are ignored (a
 * resumed stream may repeat nothing, but a reconnect must not double text).
 */
export function fold(t: Timeline, r: RunResult): Timeline {
  if (r.sequence <= t.last) {
    return t;
  }
  const items = t.items.slice();
  const data = r.data;
  const open = items.findLastIndex((i) => i.kind === 'message' && !i.done);
  switch (r.type) {
    case 'message.delta': {
      const chunk = (data.chunk ?? {}) as { content?: unknown; all_content?: string | null; role?: string };
      if (open >= 0) {
        const m = items[open] as Extract<TimelineItem, { kind: 'message' }>;
        items[open] = {
          ...m,
          text: typeof chunk.all_content === 'string' ? chunk.all_content : m.text + textOf(chunk.content),
        };
      } else {
        items.push({
          kind: 'message',
          key: `m${r.sequence}`,
          role: chunk.role ?? 'assistant',
          text: typeof chunk.all_content === 'string' ? chunk.all_content : textOf(chunk.content),
          done: false,
          sequence: r.sequence,
        });
      }
      break;
    }
    case 'message.completed': {
      const message = (data.message ?? {}) as { content?: unknown; role?: string };
      const text = textOf(message.content);
      if (open >= 0) {
        const m = items[open] as Extract<TimelineItem, { kind: 'message' }>;
        items[open] = { ...m, text: text || m.text, done: true };
      } else {
        items.push({
          kind: 'message',
          key: `m${r.sequence}`,
          role: message.role ?? 'assistant',
          text,
          done: true,
          sequence: r.sequence,
        });
      }
      break;
    }
    case 'tool.call.started':
      items.push({
        kind: 'tool',
        key: `t${r.sequence}`,
        tool_call_id: String(data.tool_call_id),
        tool_name: String(data.tool_name),
        parameters: data.parameters ?? {},
        done: false,
        sequence: r.sequence,
      });
      break;
    case 'tool.call.completed': {
      const at = items.findLastIndex((i) => i.kind === 'tool' && i.tool_call_id === data.tool_call_id);
      const done = { result: data.result, error: (data.error as string | null | undefined) ?? null, done: true };
      if (at >= 0) {
        items[at] = { ...(items[at] as Extract<TimelineItem, { kind: 'tool' }>), ...done };
      } else {
        items.push({
          kind: 'tool',
          key: `t${r.sequence}`,
          tool_call_id: String(data.tool_call_id),
          tool_name: String(data.tool_name),
          parameters: null,
          ...done,
          sequence: r.sequence,
        });
      }
      break;
    }
    case 'run.completed':
    case 'run.failed':
      if (open >= 0) {
        items[open] = { ...(items[open] as Extract<TimelineItem, { kind: 'message' }>), done: true };
      }
      items.push({
        kind: 'terminal',
        key: `x${r.sequence}`,
        type: r.type,
        data,
        source: r.source,
        sequence: r.sequence,
      });
      break;
    default:
      items.push({ kind: 'other', key: `o${r.sequence}`, type: r.type, data, sequence: r.sequence });
  }
  return {
    items,
    usage: r.usage ? r.usage : t.usage,
    last: r.sequence,
    ended: t.ended || r.type === 'run.completed' || r.type === 'run.failed',
  };
}
