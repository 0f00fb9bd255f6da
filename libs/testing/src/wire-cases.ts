import type { RunContext } from '@libs/protocol';

/*
 * Shared test inputs of the wire codec specs (libs/runner-gateway: wire, direct encoding, direct
 * decoding): a seeded random source, a random JSON generator whose shape each spec states, and the
 * run context a host sends with a run.
 */

/** A small deterministic random source: the same seed gives the same numbers every run. */
export function seededRandom(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return s / 0x100000000;
  };
}

export type JsonKind = 'null' | 'bool' | 'number' | 'string' | 'undefined' | 'array' | 'object';

/** What a random JSON value may be made of. */
export interface JsonShape {
  /** The kinds a value is picked from, each equally likely (a kind listed twice is twice as likely). */
  kinds: readonly JsonKind[];
  /** How many of `kinds`, from the start, are picked deeper than `nestUntil`: the leaves (no array or object). */
  leafKinds: number;
  /** Deeper than this, a value is one of the first `leafKinds` kinds only. */
  nestUntil: number;
  keys: readonly string[];
  strings: readonly string[];
  /**
   * Objects nested in a value as `JSON.parse` makes them from a request body: a `__proto__` key is
   * an own key, undefined becomes null, -0 becomes 0. Otherwise built by assignment.
   */
  parsedObjects: boolean;
}

export const JSON_NUMBERS: readonly number[] = [0, -0, 1.5, -3, 2 ** 53, 1e300, -1e-300];

/** A random JSON value of `shape` at `depth`. */
export function randomJson(r: () => number, shape: JsonShape, depth: number): unknown {
  const { kinds } = shape;
  const kind = kinds[Math.floor(r() * (depth > shape.nestUntil ? shape.leafKinds : kinds.length))];
  switch (kind) {
    case 'null':
      return null;
    case 'bool':
      return r() < 0.5;
    case 'number':
      return JSON_NUMBERS[Math.floor(r() * JSON_NUMBERS.length)];
    case 'string':
      return shape.strings[Math.floor(r() * shape.strings.length)];
    case 'undefined':
      return undefined;
    case 'array':
      return Array.from({ length: Math.floor(r() * 4) }, () => randomJson(r, shape, depth + 1));
    case 'object':
      return shape.parsedObjects ? parsedObject(r, shape, depth + 1) : randomObject(r, shape, depth + 1);
  }
}

/** Up to three random keys of `shape`, each set (by assignment) to a random value at `depth`. */
export function randomObject(r: () => number, shape: JsonShape, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = Math.floor(r() * 4); i > 0; i--) {
    out[shape.keys[Math.floor(r() * shape.keys.length)]] = randomJson(r, shape, depth);
  }
  return out;
}

function parsedObject(r: () => number, shape: JsonShape, depth: number): unknown {
  const entries = Array.from({ length: Math.floor(r() * 4) }, () => [
    shape.keys[Math.floor(r() * shape.keys.length)],
    randomJson(r, shape, depth),
  ]);
  const text = `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v ?? null)}`).join(',')}}`;
  return JSON.parse(text) as unknown;
}

/** A run context with every section set, as the host sends it with a run. */
export function runContextFixture(): RunContext {
  return {
    run_id: 'r1',
    trigger: { type: 'message.received', source: 'slack', timestamp: 1_700_000_000 },
    event: { event_id: 'e1', event_type: 'message.received', source: 'slack', data: { ts: '1.2', n: [1, 'a'] } },
    conversation: { conversation_id: 'c1', thread_id: 't1' },
    actor: { actor_type: 'user', actor_id: 'u1', metadata: {} },
    input: {
      text: 'hi',
      contents: [{ type: 'image', image_url: { url: 'https://x/y.png' } }],
      attachments: [{ type: 'file', name: 'a.txt', size: 3 }],
    },
    delivery: { surface: 'api', supports_streaming: true, supports_edit: false, supports_reaction: false },
    resources: {
      models: [{ model_id: 'm', model_type: 'llm', provider: 'openai', operations: ['invoke'] }],
      tools: [],
      knowledge_bases: [],
      storage: { plugin_storage: true, workspace_storage: false, binding_storage: false },
    },
    context: {
      has_history_before: true,
      latest_cursor: '7',
      event_seq: 8,
      inline_policy: {
        mode: 'current_event',
        delivered_count: 0,
        messages_complete: false,
        reason: 'current_event_only',
      },
    },
    state: { conversation: { k: { v: 1 } } },
    runtime: { host: 'runner-host', protocol_version: '1', trace_id: 'r1', deadline_at: 1_700_000_300.5 },
    config: { temperature: 0.2 },
    metadata: { agent_id: 'a1' },
  };
}
