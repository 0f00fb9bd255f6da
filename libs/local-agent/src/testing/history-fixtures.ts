import type { ChatMessage, HistoryItem, HistoryPage } from '../host-port';

/** History items oldest first: `user`/`assistant` alternating, `text(i)` as content, cursor `cursor-<i+1>`. */
export function historyItems(n: number, text: (i: number) => string): HistoryItem[] {
  return Array.from({ length: n }, (_, i) => ({
    event_id: `old-${i}`,
    role: i % 2 === 0 ? 'user' : 'assistant',
    content_json: { role: i % 2 === 0 ? 'user' : 'assistant', content: text(i) },
    cursor: `cursor-${i + 1}`,
    seq: i + 1,
  }));
}

/** One backward page (newest first), as the host returns it. */
export const backwardPage = (items: HistoryItem[]): HistoryPage => ({ items: [...items].reverse(), has_more: false });

export const contentOf = (m: ChatMessage | undefined): string => (typeof m?.content === 'string' ? m.content : '');

/** A counter like the host's: the estimator plus a fixed cost per message (to test overheads). */
export const summaryCount = (messages: ChatMessage[]) =>
  messages.filter((m) => contentOf(m).includes('<conversation_summary>')).length;
