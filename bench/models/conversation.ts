import type { JsonObject } from '../dispatch/raw-runner/struct';
import { toChatMessages } from '../../libs/resources/src/models/message-mapping';
import { TokenCounter } from '../../libs/resources/src/models/tokenizer';

/*
 * A long conversation for count_tokens: alternating user and assistant turns of pseudo-random
 * prose (seeded, so every run counts the same text), grown until the chat-completions count in
 * o200k_base reaches the target.
 */

const WORDS = (
  'the of and to in is that for it as was with be by on not he this are or his from at which but have an they you ' +
  'were her she there been one all we their has would when if so no will can more about said up out them what some ' +
  'model token context window stream chunk runner host plugin deadline grant audit usage provider request response ' +
  'Oslo Paris 2024 17 3.14 #42 (note) "quoted" naïve café résumé 東京 データ 🦆 x=y+1; foo_bar() https://example.test/a?b=c'
).split(' ');

function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function prose(next: () => number, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    out.push(WORDS[Math.floor(next() * WORDS.length)]);
    if (next() < 0.08) {
      out.push(next() < 0.5 ? '.\n' : ',');
    }
  }
  return out.join(' ');
}

export interface Conversation {
  messages: JsonObject[];
  tokens: number;
  jsonBytes: number;
}

const ABILITIES = { tool_calling: true, vision: true, streaming: true };

export function countLocally(counter: TokenCounter, messages: JsonObject[]): number {
  return counter.request(toChatMessages(messages, ABILITIES), []);
}

export function conversation(targetTokens: number): Conversation {
  const next = prng(20240601);
  const counter = new TokenCounter('o200k_base');
  const messages: JsonObject[] = [{ role: 'system', content: 'You are a careful assistant. Answer briefly.' }];
  // Each message adds its own count less the reply priming (3), which is counted once.
  let tokens = countLocally(counter, messages);
  while (tokens < targetTokens) {
    const role = messages.length % 2 === 1 ? 'user' : 'assistant';
    const message = { role, content: prose(next, 300) };
    messages.push(message);
    tokens += countLocally(counter, [message]) - 3;
  }
  return { messages, tokens: countLocally(counter, messages), jsonBytes: Buffer.byteLength(JSON.stringify(messages)) };
}
