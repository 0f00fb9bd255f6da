import { createHash } from 'node:crypto';
import type { ChatMessage, ContentElement } from '../host-port';
import { RunStopped } from '../run/controls';

/*
 * Fitting message lists into token budgets against the host counter
 * (docs/local-agent.md#compaction). Head-first keeps the start of a slice (RAG, summaries),
 * tail-first keeps its end (history, prompt, current) with a tool call and its results as one unit.
 */

export type TokenCounter = (messages: ChatMessage[]) => Promise<number>;

export class ContextTokenCounterRequiredError extends Error {
  constructor(message = 'Host count_tokens API is required for local-agent context budgeting') {
    super(message);
    this.name = 'ContextTokenCounterRequiredError';
  }
}

/** A counter that validates the host's answers (fail closed) and memoizes within one compaction. */
export function checkedCounter(count: TokenCounter | null | undefined): TokenCounter {
  if (!count) {
    throw new ContextTokenCounterRequiredError();
  }
  const memo = new Map<string, number>();
  return async (messages) => {
    if (messages.length === 0) {
      return 0;
    }
    // Hashed: probes of a large context would otherwise keep many copies of it as keys.
    const key = createHash('sha1').update(JSON.stringify(messages)).digest('base64');
    const hit = memo.get(key);
    if (hit !== undefined) {
      return hit;
    }
    let n: number;
    try {
      n = await count(messages);
    } catch (e) {
      if (e instanceof RunStopped) {
        throw e;
      }
      const reason = e instanceof Error ? e.message : String(e);
      throw new ContextTokenCounterRequiredError(
        `Host count_tokens API is required for local-agent context budgeting: ${reason}`,
      );
    }
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) {
      throw new ContextTokenCounterRequiredError('Host count_tokens API returned invalid token count');
    }
    memo.set(key, n);
    return n;
  };
}

/** Largest n in [0, max] with ok(n), given ok is monotone and ok(0) is checked by the caller. */
async function largest(max: number, ok: (n: number) => Promise<boolean>): Promise<number> {
  let lo = 0;
  let hi = max;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (await ok(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

/**
 * `m` cut so that `count(place(m'))` stays within `budget`: string content to its longest
 * fitting prefix, list content text-first in order (media only whole). Null when nothing fits
 * (a tool message may stay with empty content, keeping its call paired).
 */
export async function truncateMessage(
  m: ChatMessage,
  budget: number,
  count: TokenCounter,
  place: (m: ChatMessage) => ChatMessage[] = (x) => [x],
): Promise<ChatMessage | null> {
  const fits = async (x: ChatMessage) => (await count(place(x))) <= budget;
  const empty: ChatMessage = { ...m, content: '' };
  if (!(await fits(empty))) {
    return null;
  }
  const isTool = m.role === 'tool';
  if (typeof m.content === 'string') {
    const text = m.content;
    const n = await largest(text.length, (k) => fits({ ...m, content: text.slice(0, k) }));
    if (n === 0 && !isTool && !(m.tool_calls && m.tool_calls.length > 0)) {
      return null;
    }
    return { ...m, content: text.slice(0, n) };
  }
  if (Array.isArray(m.content)) {
    const kept: ContentElement[] = [];
    for (const el of m.content) {
      if (el.type === 'text' && typeof el.text === 'string') {
        if (await fits({ ...m, content: [...kept, el] })) {
          kept.push(el);
          continue;
        }
        const text = el.text;
        const n = await largest(text.length, (k) =>
          fits({ ...m, content: [...kept, { ...el, text: text.slice(0, k) }] }),
        );
        if (n > 0) {
          kept.push({ ...el, text: text.slice(0, n) });
        }
        break;
      }
      if (await fits({ ...m, content: [...kept, el] })) {
        kept.push(el);
      }
    }
    if (kept.length === 0 && !isTool && !(m.tool_calls && m.tool_calls.length > 0)) {
      return null;
    }
    return { ...m, content: kept.length === 0 ? '' : kept };
  }
  return isTool || (m.tool_calls && m.tool_calls.length > 0) ? m : null;
}

/** Head-first: whole messages while they fit, then the first that does not, cut; then stop. */
export async function fitHead(messages: ChatMessage[], budget: number, count: TokenCounter): Promise<ChatMessage[]> {
  const out: ChatMessage[] = [];
  if (budget <= 0) {
    return out;
  }
  for (const m of messages) {
    if ((await count([...out, m])) <= budget) {
      out.push(m);
      continue;
    }
    const cut = await truncateMessage(m, budget, count, (x) => [...out, x]);
    if (cut) {
      out.push(cut);
    }
    break;
  }
  return out;
}

/** Units from the end: an assistant with tool calls plus its following tool results, else one message. */
export function toolUnits(messages: ChatMessage[]): ChatMessage[][] {
  const units: ChatMessage[][] = [];
  let i = 0;
  while (i < messages.length) {
    const m = messages[i];
    if (m.role === 'assistant' && m.tool_calls && m.tool_calls.length > 0) {
      let j = i + 1;
      while (j < messages.length && messages[j].role === 'tool') {
        j++;
      }
      units.push(messages.slice(i, j));
      i = j;
    } else {
      units.push([m]);
      i += 1;
    }
  }
  return units;
}

/** Tail-first: whole units from the end while they fit; only the first unit may be partial. */
export async function fitTail(messages: ChatMessage[], budget: number, count: TokenCounter): Promise<ChatMessage[]> {
  let out: ChatMessage[] = [];
  if (budget <= 0) {
    return out;
  }
  const units = toolUnits(messages);
  for (let u = units.length - 1; u >= 0; u--) {
    const unit = units[u];
    if ((await count([...unit, ...out])) <= budget) {
      out = [...unit, ...out];
      continue;
    }
    if (out.length === 0) {
      out = await partialUnit(unit, budget, count);
    }
    break;
  }
  return out;
}

async function partialUnit(unit: ChatMessage[], budget: number, count: TokenCounter): Promise<ChatMessage[]> {
  const [head, ...results] = unit;
  if (results.length === 0) {
    const cut = await truncateMessage(head, budget, count);
    return cut ? [cut] : [];
  }
  if ((await count([head])) > budget) {
    return [];
  }
  const out = [head];
  for (const r of results) {
    if ((await count([...out, r])) <= budget) {
      out.push(r);
      continue;
    }
    const cut = await truncateMessage(r, budget, count, (x) => [...out, x]);
    if (cut) {
      out.push(cut);
    }
    break;
  }
  return out;
}
