import fc from 'fast-check';
import type { ChatMessage } from '../host-port';
import { computeBudget } from './budget';
import { compactFrame } from './compactor';
import { checkedCounter } from './fit';
import { sanitizeMessages } from './sanitize';
import { summarizeMessages } from './summary';
import { estimateMessagesTokens } from './tokens';

/*
 * Compaction invariants over open-ended inputs (docs/local-agent.md#compaction): within budget, sanitized (no
 * orphan tool result, no call without its result), at most one summary, and the current input
 * last whenever anything is kept.
 */

const text = fc.string({ minLength: 0, maxLength: 300 });
const word = fc.stringMatching(/^[a-z]{1,8}$/);

let ids = 0;
const unit = fc.oneof(
  text.map((t): ChatMessage[] => [{ role: 'user', content: t || 'q' }]),
  text.map((t): ChatMessage[] => [{ role: 'assistant', content: t || 'a' }]),
  fc.tuple(word, text, fc.integer({ min: 1, max: 3 })).map(([name, t, n]): ChatMessage[] => {
    const calls = Array.from({ length: n }, () => ({
      id: `c${++ids}`,
      type: 'function',
      function: { name, arguments: '{}' },
    }));
    return [
      { role: 'assistant', content: '', tool_calls: calls },
      ...calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: t })),
    ];
  }),
);

const frame = fc.record({
  prompt: fc.array(
    text.map((t): ChatMessage => ({ role: 'system', content: t || 'p' })),
    { maxLength: 3 },
  ),
  history: fc.array(unit, { maxLength: 12 }).map((u) => u.flat()),
  rag: fc.array(
    text.map((t): ChatMessage => ({ role: 'system', content: t || 'r' })),
    { maxLength: 2 },
  ),
  current: fc.oneof(
    text.map((t): ChatMessage[] => [{ role: 'user', content: `CURRENT ${t}` }]),
    unit.filter((u) => u.length > 1),
  ),
});

const budgetArb = fc.record({
  window: fc.integer({ min: 20, max: 3000 }),
  reserve: fc.integer({ min: 0, max: 400 }),
  keep: fc.integer({ min: 0, max: 800 }),
  summary: fc.integer({ min: 0, max: 300 }),
  overhead: fc.integer({ min: 0, max: 12 }),
  /** A constant per request, as real tokenizers add for the reply priming: counts are not additive. */
  perRequest: fc.integer({ min: 0, max: 5 }),
});

describe('compaction invariants (property)', () => {
  it('stays within the input budget, sanitized, one summary at most, current input last', async () => {
    await fc.assert(
      fc.asyncProperty(frame, budgetArb, async (f, b) => {
        const budget = computeBudget(
          { window_tokens: b.window, reserve_tokens: b.reserve, keep_recent_tokens: b.keep, summary_tokens: b.summary },
          null,
          null,
        );
        const count = checkedCounter((m) =>
          Promise.resolve(estimateMessagesTokens(m) + b.overhead * m.length + (m.length > 0 ? b.perRequest : 0)),
        );
        const r = await compactFrame(f, {
          budget,
          count,
          summarize: (om, max) => Promise.resolve(summarizeMessages(om, max)),
        });
        expect(r.tokens_after).toBeLessThanOrEqual(budget.input_tokens);
        expect(sanitizeMessages(r.messages)).toEqual(r.messages);
        const summaries = r.messages.filter(
          (m) => typeof m.content === 'string' && m.content.includes('<conversation_summary>'),
        );
        expect(summaries.length).toBeLessThanOrEqual(1);
        if (r.messages.length > 0) {
          const last = r.messages.at(-1)!;
          const cur = f.current.at(-1)!;
          expect(last.role).toBe(cur.role);
          if (cur.role === 'tool') {
            // The current tool turn may keep only the results that fit (a partial unit).
            expect(f.current.map((m) => m.tool_call_id)).toContain(last.tool_call_id);
          }
        }
      }),
      { numRuns: 200 },
    );
  });
});
