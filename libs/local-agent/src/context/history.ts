import { z } from 'zod';
import type { ChatMessage, HistoryItem, JsonObject, LocalAgentHostPort } from '../host-port';
import { RunStopped, type RunControls } from '../run/controls';

/*
 * Conversation history and the compaction checkpoint (docs/local-agent.md#history-and-the-checkpoint). Without a
 * checkpoint: one backward page, reversed. With one: its summary stands for everything up to
 * `covers_until`, and history is paged forward from there. Each history message remembers its
 * transcript cursor (a symbol key: never sent to a model) so a new checkpoint knows what it covers.
 */

export const CHECKPOINT_KEY = 'runner.compaction.checkpoint';
export const CHECKPOINT_SCHEMA = 'langbot.local_agent.compaction_checkpoint.v1';
/** Forward paging stops here even if the host says there is more (compaction bounds the rest). */
const MAX_FORWARD_PAGES = 100;

const CURSOR = Symbol('transcript-cursor');
type WithCursor = ChatMessage & { [CURSOR]?: string };

export const cursorOf = (m: ChatMessage): string | null => (m as WithCursor)[CURSOR] ?? null;
export function withCursor(m: ChatMessage, cursor: string | null): ChatMessage {
  const out: WithCursor = { ...m };
  if (cursor) {
    out[CURSOR] = cursor;
  }
  return out;
}

const checkpointSchema = z.looseObject({
  schema_version: z.literal(CHECKPOINT_SCHEMA),
  summary: z.string().refine((v) => v.trim() !== '', 'must not be blank'),
  covers_until: z.string(),
  tokens_before: z.number(),
  created_at: z.number(),
  conversation_id: z.string().nullable().default(null),
});
export type Checkpoint = z.infer<typeof checkpointSchema>;

interface HistoryScope {
  port: LocalAgentHostPort;
  controls: RunControls;
  conversationId: string;
  currentEventId: string | null;
  limit: number;
}

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The stored checkpoint if it is valid for this conversation, else null. */
export async function loadCheckpoint(port: LocalAgentHostPort, controls: RunControls, conversationId: string | null) {
  let value: unknown;
  try {
    value = await controls.race(port.stateGet('conversation', CHECKPOINT_KEY));
  } catch (e) {
    if (e instanceof RunStopped) {
      throw e;
    }
    return null;
  }
  // Another schema version, a foreign or damaged value: no checkpoint (history is read in full).
  const parsed = checkpointSchema.safeParse(value);
  if (!parsed.success) {
    return null;
  }
  const checkpoint = parsed.data;
  if (conversationId && checkpoint.conversation_id !== null && checkpoint.conversation_id !== conversationId) {
    return null;
  }
  return checkpoint;
}

function itemMessage(item: HistoryItem): ChatMessage | null {
  const json = item.content_json;
  if (isObject(json) && typeof json.role === 'string') {
    const { role, content, tool_calls, tool_call_id, name } = json as ChatMessage;
    const m: ChatMessage = { role, content: content ?? '' };
    if (Array.isArray(tool_calls) && tool_calls.length > 0) {
      m.tool_calls = tool_calls;
    }
    if (typeof tool_call_id === 'string') {
      m.tool_call_id = tool_call_id;
    }
    if (typeof name === 'string') {
      m.name = name;
    }
    return m;
  }
  if (typeof item.role === 'string' && typeof item.content === 'string' && item.content !== '') {
    return { role: item.role, content: item.content };
  }
  return null;
}

function toMessages(items: HistoryItem[], currentEventId: string | null): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (const item of items) {
    if (!item || (currentEventId && item.event_id === currentEventId)) {
      continue; // the current input is already the current message
    }
    const m = itemMessage(item);
    if (m) {
      const cursor = item.cursor ?? (item.seq !== null && item.seq !== undefined ? String(item.seq) : null);
      out.push(withCursor(m, cursor));
    }
  }
  return out;
}

async function recentTail(s: HistoryScope): Promise<ChatMessage[]> {
  const page = await s.controls.race(
    s.port.historyPage({ conversation_id: s.conversationId, limit: s.limit, direction: 'backward' }),
  );
  return toMessages([...(page.items ?? [])].reverse(), s.currentEventId);
}

async function forwardFrom(s: HistoryScope, cursor: string): Promise<ChatMessage[]> {
  const out: ChatMessage[] = [];
  const seen = new Set<string>([cursor]);
  let after = cursor;
  for (let pages = 0; pages < MAX_FORWARD_PAGES; pages++) {
    const page = await s.controls.race(
      s.port.historyPage({
        conversation_id: s.conversationId,
        limit: s.limit,
        direction: 'forward',
        after_cursor: after,
      }),
    );
    out.push(...toMessages(page.items ?? [], s.currentEventId));
    const next = page.next_cursor;
    if (!page.has_more || !next || seen.has(next)) {
      break;
    }
    seen.add(next);
    after = next;
  }
  return out;
}

export interface LoadedHistory {
  checkpoint: Checkpoint | null;
  /** The checkpoint's summary message first (when there is one), then history, oldest first. */
  messages: ChatMessage[];
}

/** History for this run; a failure with a checkpoint falls back once to the recent tail. */
export async function loadHistory(s: HistoryScope, checkpoint: Checkpoint | null): Promise<LoadedHistory> {
  if (checkpoint) {
    try {
      const rest = await forwardFrom(s, checkpoint.covers_until);
      const summary = withCursor({ role: 'system', content: checkpoint.summary }, checkpoint.covers_until);
      return { checkpoint, messages: [summary, ...rest] };
    } catch (e) {
      if (e instanceof RunStopped) {
        throw e;
      }
    }
  }
  return { checkpoint: null, messages: await recentTail(s) };
}

/** The cursor a new checkpoint covers: the last cursor among the messages it summarized. */
export function coveredCursor(omitted: readonly ChatMessage[], previous: Checkpoint | null): string | null {
  for (let i = omitted.length - 1; i >= 0; i--) {
    const c = cursorOf(omitted[i]);
    if (c) {
      return c;
    }
  }
  return previous?.covers_until ?? null;
}

/** Writes a checkpoint; a failed write never fails the run (the next run just compacts again). */
export async function saveCheckpoint(
  port: LocalAgentHostPort,
  controls: RunControls,
  checkpoint: Checkpoint,
): Promise<void> {
  try {
    await controls.race(port.stateSet('conversation', CHECKPOINT_KEY, checkpoint));
  } catch (e) {
    if (e instanceof RunStopped) {
      throw e;
    }
  }
}
