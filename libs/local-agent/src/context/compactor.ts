import type { ChatMessage } from '../host-port';
import type { ContextBudget } from './budget';
import { fitHead, fitTail, type TokenCounter } from './fit';
import { isSummaryMessage } from './messages';
import { sanitizeMessages } from './sanitize';
import type { Summarizer } from './summary';

/*
 * Compaction (docs/local-agent.md#compaction): when the frame prompt | summaries | history | rag | current is
 * over the input budget, older history becomes one <conversation_summary>, recent history stays
 * verbatim, RAG is bounded, and a final fit guarantees the current input survives.
 */

export interface Frame {
  prompt: ChatMessage[];
  history: ChatMessage[];
  rag: ChatMessage[];
  current: ChatMessage[];
}

/** Provider usage of the previous turn: the first `message_count` messages cost `total_tokens`. */
export interface UsageAnchor {
  total_tokens: number;
  message_count: number;
}

export interface CompactionResult {
  messages: ChatMessage[];
  compacted: boolean;
  /** History messages folded into the summary (the checkpoint cursor is the last of them). */
  omitted: ChatMessage[];
  summary: string | null;
  tokens_before: number;
  tokens_after: number;
}

export interface CompactorDeps {
  budget: ContextBudget;
  count: TokenCounter;
  summarize: Summarizer;
}

const sum = (...parts: ChatMessage[][]) => parts.flat();

async function tokensBefore(all: ChatMessage[], count: TokenCounter, anchor?: UsageAnchor | null): Promise<number> {
  if (anchor && anchor.total_tokens > 0 && anchor.message_count >= 0 && anchor.message_count <= all.length) {
    return anchor.total_tokens + (await count(all.slice(anchor.message_count)));
  }
  return count(all);
}

export async function compactFrame(
  frame: Frame,
  deps: CompactorDeps,
  anchor?: UsageAnchor | null,
): Promise<CompactionResult> {
  const { budget, count } = deps;
  const input = budget.input_tokens;
  const promptAll = sanitizeMessages(frame.prompt);
  const P = promptAll.filter((m) => !isSummaryMessage(m));
  const H = [...promptAll.filter(isSummaryMessage), ...sanitizeMessages(frame.history)];
  let R = sanitizeMessages(frame.rag);
  const C = sanitizeMessages(frame.current);
  const before = await tokensBefore(sum(P, H, R, C), count, anchor);
  const unchanged = { compacted: false, omitted: [], summary: null, tokens_before: before };

  if (!budget.enabled) {
    const messages = sanitizeMessages(sum(P, H, R, C));
    return { ...unchanged, messages, tokens_after: await count(messages) };
  }
  if (before <= input) {
    // Within budget: nothing to fit (and no second count — per turn this is the common case).
    return { ...unchanged, messages: sanitizeMessages(sum(P, H, R, C)), tokens_after: before };
  }

  // RAG pre-fit: with history to protect, RAG gets at most a quarter of the input.
  const avail = input - (await count(sum(P, C)));
  if (avail <= 0) {
    R = [];
  } else if (H.length === 0) {
    R = await fitHead(R, avail, count);
  } else {
    const historyReserve = Math.min(budget.keep_recent_tokens, Math.max(1, Math.floor(avail / 2)));
    const ragBudget = Math.min(Math.max(avail - historyReserve, 0), Math.max(1, Math.floor(input / 4)));
    R = await fitHead(R, ragBudget, count);
  }

  const historyBudget = Math.max(input - (await count(sum(P, R, C))), 0);
  if (H.length === 0) {
    return finish({ P, S: [], H, R, C }, deps, unchanged);
  }
  if (historyBudget <= 0) {
    const summary = await deps.summarize(H, budget.summary_tokens);
    const S = summaryMessages(summary, budget.summary_tokens);
    return finish({ P, S, H: [], R, C }, deps, { ...unchanged, compacted: true, omitted: H, summary });
  }

  let summaryBudget = 0;
  if (budget.summary_tokens > 0) {
    if (historyBudget > budget.keep_recent_tokens) {
      summaryBudget = Math.min(budget.summary_tokens, historyBudget - budget.keep_recent_tokens);
    } else if (historyBudget >= 30) {
      summaryBudget = Math.min(budget.summary_tokens, Math.max(20, Math.floor(historyBudget / 3)));
    }
  }
  const recentBudget = Math.max(historyBudget - summaryBudget, 0);
  let cut = H.length;
  let used = 0;
  for (let i = H.length - 1; i >= 0; i--) {
    const n = await count([H[i]]);
    if (used + n > recentBudget) {
      break;
    }
    used += n;
    cut = i;
  }
  while (cut > 0 && cut < H.length && H[cut].role === 'tool') {
    cut -= 1; // never start the kept tail with a tool result cut from its call
  }
  const omitted = H.slice(0, cut);
  const recent = H.slice(cut);
  if (omitted.length === 0) {
    return finish({ P, S: [], H: recent, R, C }, deps, unchanged);
  }
  const summary = summaryBudget > 0 ? await deps.summarize(omitted, summaryBudget) : null;
  const S = summary ? summaryMessages(summary, summaryBudget) : [];
  return finish({ P, S, H: recent, R, C }, deps, { ...unchanged, compacted: true, omitted, summary });
}

function summaryMessages(summary: string | null, maxTokens: number): ChatMessage[] {
  return summary && maxTokens > 0 ? [{ role: 'system', content: summary }] : [];
}

interface Parts {
  P: ChatMessage[];
  S: ChatMessage[];
  H: ChatMessage[];
  R: ChatMessage[];
  C: ChatMessage[];
}

async function finish(
  parts: Parts,
  deps: CompactorDeps,
  meta: Omit<CompactionResult, 'messages' | 'tokens_after'>,
): Promise<CompactionResult> {
  const fitted = await fitFrame(parts, deps.budget.input_tokens, deps.count);
  const messages = sanitizeMessages(sum(fitted.P, fitted.S, fitted.H, fitted.R, fitted.C));
  return { ...meta, messages, tokens_after: await deps.count(messages) };
}

/**
 * The final fit (docs/local-agent.md#compaction, step 3): trim R, S, H, P in turn; at worst keep
 * the current input first.
 */
export async function fitFrame(parts: Parts, input: number, count: TokenCounter): Promise<Parts> {
  let { P, S, H, R } = parts;
  const { C } = parts;
  const total = () => count(sum(P, S, H, R, C));
  if ((await total()) <= input) {
    return parts;
  }
  R = await fitHead(R, input - (await count(sum(P, S, H, C))), count);
  if ((await total()) <= input) {
    return { P, S, H, R, C };
  }
  S = await fitHead(S, input - (await count(sum(P, H, R, C))), count);
  if ((await total()) <= input) {
    return { P, S, H, R, C };
  }
  H = await fitTail(H, input - (await count(sum(P, S, R, C))), count);
  if ((await total()) <= input) {
    return { P, S, H, R, C };
  }
  P = await fitTail(P, input - (await count(sum(S, H, R, C))), count);
  if ((await total()) <= input) {
    return { P, S, H, R, C };
  }
  // Preserve the current input: fit it alone, then fill what is left by priority.
  const current = await fitTail(C, input, count);
  if (current.length === 0) {
    return { P: [], S: [], H: [], R: [], C: [] };
  }
  const left = async (...kept: ChatMessage[][]) => input - (await count(sum(...kept, current)));
  const P2 = await fitTail(parts.P, await left(), count);
  const S2 = await fitHead(S, await left(P2), count);
  const H2 = await fitTail(H, await left(P2, S2), count);
  const R2 = await fitHead(R, await left(P2, S2, H2), count);
  const C2 = await fitTail(C, input - (await count(sum(P2, S2, H2, R2))), count);
  return { P: P2, S: S2, H: H2, R: R2, C: C2.length > 0 ? C2 : current };
}

/**
 * Splits a flat turn list into prompt | history | current (docs/local-agent.md#sanitizing-and-the-per-turn-split):
 * leading system messages are the prompt (summaries among them go to history), the current tail
 * is the last user message or the current tool turn (with the user messages right before it).
 */
export function splitTurn(messages: ChatMessage[]): Frame {
  let p = 0;
  while (p < messages.length && (messages[p].role === 'system' || messages[p].role === 'developer')) {
    p++;
  }
  const lead = messages.slice(0, p);
  const rest = messages.slice(p);
  let tail = rest.length;
  const last = rest[rest.length - 1];
  if (last?.role === 'tool') {
    let a = rest.length - 1;
    while (a >= 0 && rest[a].role === 'tool') {
      a--;
    }
    if (a >= 0 && rest[a].role === 'assistant' && (rest[a].tool_calls?.length ?? 0) > 0) {
      tail = a;
      while (tail > 0 && rest[tail - 1].role === 'user') {
        tail--;
      }
    }
  } else if (last?.role === 'user' || (last?.role === 'assistant' && (last.tool_calls?.length ?? 0) > 0)) {
    tail = rest.length - 1;
  }
  return {
    prompt: lead.filter((m) => !isSummaryMessage(m)),
    history: [...lead.filter(isSummaryMessage), ...rest.slice(0, tail)],
    rag: [],
    current: rest.slice(tail),
  };
}
