import type { ChatMessage } from '../host-port';
import { isSummaryMessage, messageToText } from './messages';
import { attachRefs, collectRefs, truncateToTokens } from './summary-refs';
import { estimateTextTokens } from './tokens';

/*
 * Conversation summaries (docs/local-agent.md#summaries). The LLM summarizer is the default; the deterministic
 * one is its fallback (error or empty output), so summarizing never fails a run. Both attach the
 * reference block and never nest: an older summary is folded into the new one.
 */

export type Summarizer = (omitted: ChatMessage[], maxTokens: number) => Promise<string>;

const OPEN = '<conversation_summary>';
const CLOSE = '</conversation_summary>';

export function summaryBody(text: string): string {
  const m = /<conversation_summary>([\s\S]*?)<\/conversation_summary>/.exec(text);
  return (m ? m[1] : text).replace(/<critical_refs>[\s\S]*?<\/critical_refs>|<files>[\s\S]*?<\/files>/g, '').trim();
}

interface Entries {
  count: number;
  entries: string[];
}

function parseSummaryEntries(text: string, into: Entries): void {
  const body = summaryBody(text);
  let parsed = false;
  for (const line of body.split('\n')) {
    const entry = /^\s*\d+\.\s+([A-Za-z_]+):\s?(.*)$/.exec(line);
    const count = /count=(\d+)/.exec(line);
    if (entry) {
      into.entries.push(`${entry[1]}: ${entry[2]}`);
      parsed = true;
    } else if (count) {
      into.count += Number(count[1]);
      parsed = true;
    }
  }
  if (!parsed && body !== '') {
    into.entries.push(`summary: ${body.replace(/\s+/g, ' ')}`);
  }
}

/** The deterministic summary: one numbered line per omitted message, within `maxTokens`. */
export function summarizeMessages(omitted: readonly ChatMessage[], maxTokens: number): string {
  const acc: Entries = { count: 0, entries: [] };
  for (const m of omitted) {
    if (isSummaryMessage(m)) {
      parseSummaryEntries(m.content as string, acc);
      continue;
    }
    acc.count += 1;
    const text =
      messageToText({ ...m, tool_calls: null }).trim() ||
      (m.tool_calls ?? []).map((c) => c.function?.name ?? '').join('; ');
    acc.entries.push(`${m.role}: ${text.replace(/\s+/g, ' ')}`);
  }
  const lines = [OPEN, `v=v1 count=${acc.count}`];
  const closed = () => [...lines, CLOSE].join('\n');
  for (const [i, entry] of acc.entries.entries()) {
    const prefix = `${i + 1}. `;
    const room = maxTokens - estimateTextTokens(closed()) - estimateTextTokens(`\n${prefix}`);
    if (room <= 0) {
      break;
    }
    const text = truncateToTokens(entry, room);
    if (text === '') {
      break;
    }
    lines.push(prefix + text);
    if (text.length < entry.length) {
      break;
    }
  }
  return attachRefs(closed(), collectRefs(omitted), maxTokens);
}

const SYSTEM =
  'You are a context summarization assistant. Do not continue the conversation and do not answer questions in it. ' +
  'Output only the structured summary.';

const SKELETON = [
  '## Goal',
  '## Constraints & Preferences',
  '## Progress',
  '### Done',
  '- [x] ...',
  '### In Progress',
  '- [ ] ...',
  '### Blocked',
  '## Key Decisions',
  '- **Decision**: rationale',
  '## Next Steps',
  '1. ...',
  '## Critical Context',
].join('\n');

const INITIAL =
  'Summarize the conversation above so another assistant can continue it. Use exactly this structure:\n' +
  SKELETON +
  '\nKeep exact file paths, function names, identifiers and error messages.';

const UPDATE =
  'Update the previous summary with the conversation above. Preserve everything still relevant from the previous ' +
  'summary, add the new progress, move finished In Progress items to Done, refresh Next Steps, and keep exact file ' +
  'paths, function names, identifiers and error messages. Use exactly this structure:\n' +
  SKELETON;

/** The summarization request: transcript of the omitted messages plus initial or update instructions. */
export function summaryRequest(omitted: readonly ChatMessage[]): { messages: ChatMessage[]; previous: string } {
  const previous = omitted
    .filter(isSummaryMessage)
    .map((m) => summaryBody(m.content as string))
    .filter((b) => b !== '')
    .join('\n\n---\n\n');
  const transcript = omitted
    .filter((m) => !isSummaryMessage(m))
    .map((m, i) => `<message index="${i}" role="${m.role}">\n${messageToText(m) || '(empty)'}\n</message>`)
    .join('\n\n');
  let prompt = `<conversation>\n${transcript}\n</conversation>`;
  prompt += previous ? `\n\n<previous-summary>\n${previous}\n</previous-summary>\n\n${UPDATE}` : `\n\n${INITIAL}`;
  return {
    messages: [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: prompt },
    ],
    previous,
  };
}

/** Wraps an LLM summary body as a tagged summary within `maxTokens`, with the reference block. */
export function wrapLlmSummary(body: string, omitted: readonly ChatMessage[], maxTokens: number): string {
  const count = Math.max(omitted.filter((m) => !isSummaryMessage(m)).length, 1);
  const head = `${OPEN}\nv=1 source=llm count=${count}\n`;
  const room = Math.max(0, maxTokens - estimateTextTokens(`${head}\n${CLOSE}`));
  const text = `${head}${truncateToTokens(body.trim(), room)}\n${CLOSE}`;
  return attachRefs(text, collectRefs(omitted), maxTokens);
}

export type InvokeForSummary = (messages: ChatMessage[]) => Promise<string>;

/** The LLM summarizer over `invoke`, falling back to the deterministic summary. */
export function llmSummarizer(invoke: InvokeForSummary): Summarizer {
  return async (omitted, maxTokens) => {
    try {
      const body = (await invoke(summaryRequest(omitted).messages)).trim();
      if (body !== '') {
        return wrapLlmSummary(body, omitted, maxTokens);
      }
    } catch {
      // a failed summary call never fails the run: the deterministic summary stands in
    }
    return summarizeMessages(omitted, maxTokens);
  };
}
