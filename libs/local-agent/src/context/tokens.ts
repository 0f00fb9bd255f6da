import type { ChatMessage, ContentElement } from '../host-port';

/*
 * The deterministic token estimator (docs/local-agent.md#token-counting); its arithmetic is
 * fixed so numeric fixtures line up. Production budgeting never uses it to decide (the host's
 * count_tokens does, failing closed); it renders summaries to a token bound and is the test
 * fake's counter.
 */

export function charsToTokens(n: number): number {
  return n <= 0 ? 0 : Math.max(1, Math.ceil(n / 4));
}

const CJK_RANGES: readonly [number, number][] = [
  [0x1100, 0x11ff],
  [0x2e80, 0x2eff],
  [0x2f00, 0x2fdf],
  [0x3000, 0x303f],
  [0x3040, 0x309f],
  [0x30a0, 0x30ff],
  [0x3100, 0x312f],
  [0x3130, 0x318f],
  [0x31a0, 0x31bf],
  [0x31f0, 0x31ff],
  [0x3400, 0x4dbf],
  [0x4e00, 0x9fff],
  [0xac00, 0xd7af],
  [0xf900, 0xfaff],
  [0xff00, 0xffef],
];
const SYMBOL_RANGES: readonly [number, number][] = [
  [0x1f000, 0x1faff],
  [0x2600, 0x27bf],
  [0xfe00, 0xfe0f],
];
const OTHER_SYMBOL = /^\p{So}$/u;

const inRanges = (cp: number, ranges: readonly [number, number][]) => ranges.some(([a, b]) => cp >= a && cp <= b);

/** CJK and symbol characters cost one token each; runs of other characters cost ceil(len/4). */
export function estimateTextTokens(text: string | null | undefined): number {
  if (!text) {
    return 0;
  }
  let tokens = 0;
  let run = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    if (inRanges(cp, CJK_RANGES) || inRanges(cp, SYMBOL_RANGES) || OTHER_SYMBOL.test(ch)) {
      tokens += charsToTokens(run) + 1;
      run = 0;
    } else {
      run += 1;
    }
  }
  return tokens + charsToTokens(run);
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

export function isMediaElement(el: ContentElement): boolean {
  return el.type.startsWith('image') || el.type.startsWith('file');
}

function contentTokens(content: ChatMessage['content']): number {
  if (typeof content === 'string') {
    return estimateTextTokens(content);
  }
  if (!Array.isArray(content)) {
    return 0;
  }
  let total = 0;
  for (const el of content) {
    if (el.type === 'text') {
      total += estimateTextTokens(str(el.text));
    } else if (isMediaElement(el)) {
      const url = el.image_url && typeof el.image_url === 'object' ? str(el.image_url.url) : str(el.image_url);
      total += Math.max(
        1600,
        charsToTokens(str(el.image_base64).length + str(el.file_base64).length),
        estimateTextTokens(url) + estimateTextTokens(str(el.file_url)) + estimateTextTokens(str(el.file_name)),
      );
    }
  }
  return total;
}

export function estimateMessageTokens(m: ChatMessage): number {
  let total = charsToTokens(str(m.role).length + 8) + contentTokens(m.content);
  total += estimateTextTokens(str(m.name)) + estimateTextTokens(str(m.tool_call_id));
  for (const call of m.tool_calls ?? []) {
    total +=
      estimateTextTokens(str(call.id)) +
      estimateTextTokens(str(call.type)) +
      estimateTextTokens(str(call.function?.name)) +
      estimateTextTokens(str(call.function?.arguments));
  }
  return total;
}

export function estimateMessagesTokens(messages: readonly ChatMessage[]): number {
  return messages.reduce((sum, m) => sum + estimateMessageTokens(m), 0);
}
