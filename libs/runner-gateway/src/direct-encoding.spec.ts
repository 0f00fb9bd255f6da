import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { Field, Type } from 'protobufjs';
import { LOADER_OPTIONS, NOT_PLAIN, plainEncoder, protoPath, protoType } from '@libs/proto';
import { directSerializer, encodeHostMessagesDirectly } from './direct-encoding';
import { toHostMessage } from './wire';

const def = protoLoader.loadSync(protoPath(), LOADER_OPTIONS);
const pkg = grpc.loadPackageDefinition(def) as unknown as {
  runnerhost: { v1: { RunnerGatewayService: grpc.ServiceClientConstructor } };
};
const connect = pkg.runnerhost.v1.RunnerGatewayService.service.Connect;
/** proto-loader's own serializer: `fromObject` then `encode`. */
const viaFromObject = (value: object) => connect.responseSerialize(value);
const hostMessage = protoType('runnerhost/v1/gateway.proto', 'runnerhost.v1.HostMessage');
const direct = plainEncoder(hostMessage);

/** A small deterministic random source (the same messages every run). */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return s / 0x100000000;
  };
}

const KEYS = ['a', 'b', '0', '17', 'é', '__proto__', 'with space', '', 'k\u0000', '😀'];

function json(r: () => number, depth: number): unknown {
  const pick = Math.floor(r() * (depth > 2 ? 5 : 8));
  switch (pick) {
    case 0:
      return null;
    case 1:
      return r() < 0.5;
    case 2:
      return [0, -0, 1.5, -3, 2 ** 53, 1e300, -1e-300][Math.floor(r() * 7)];
    case 3:
      return ['', 'x', 'héllo', '😀', 'a\nb'][Math.floor(r() * 5)];
    case 4:
      return undefined;
    case 5:
      return Array.from({ length: Math.floor(r() * 4) }, () => json(r, depth + 1));
    default: {
      // JSON.parse makes `__proto__` an own key, as a request body would.
      const entries = Array.from({ length: Math.floor(r() * 4) }, () => [
        KEYS[Math.floor(r() * KEYS.length)],
        json(r, depth + 1),
      ]);
      const text = `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v ?? null)}`).join(',')}}`;
      return JSON.parse(text) as unknown;
    }
  }
}

function scalar(r: () => number, type: string): unknown {
  switch (type) {
    case 'string':
      return ['', 'run-1', 'héllo 😀', 'x'.repeat(200)][Math.floor(r() * 4)];
    case 'bool':
      return r() < 0.5;
    case 'double':
    case 'float':
      return [0, 0.5, -2.25, 1_700_000_300.5][Math.floor(r() * 4)];
    case 'int64':
    case 'sint64':
      return [0, 1, -1, 300, 1_700_000_000, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER][Math.floor(r() * 7)];
    default:
      return [0, 1, 127, 128, 65_535][Math.floor(r() * 5)];
  }
}

/** A plain message of `type` with a random subset of its fields set, nested messages included. */
function message(r: () => number, type: Type, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of type.fieldsArray) {
    if (r() < 0.25) {
      continue;
    }
    const one = () => fieldValue(r, f, depth);
    out[f.name] = f.repeated ? Array.from({ length: Math.floor(r() * 3) }, one) : r() < 0.1 ? null : one();
  }
  return out;
}

function fieldValue(r: () => number, f: Field, depth: number): unknown {
  const t = f.resolvedType as Type | null;
  if (!t) {
    return scalar(r, f.type);
  }
  if (t.fullName === '.google.protobuf.Struct') {
    const object: Record<string, unknown> = {};
    for (let i = Math.floor(r() * 4); i > 0; i--) {
      object[KEYS[Math.floor(r() * KEYS.length)]] = json(r, 0);
    }
    return object;
  }
  return depth > 6 ? {} : message(r, t, depth + 1);
}

describe('the Connect stream encoded directly', () => {
  it('writes the same bytes as fromObject + encode for random messages of every HostMessage field', () => {
    const r = random(16);
    hostMessage.resolveAll();
    let written = 0;
    for (let i = 0; i < 400; i++) {
      const msg = message(r, hostMessage, 0);
      let bytes: Buffer | null = null;
      try {
        bytes = direct(msg);
        written++;
      } catch (e) {
        expect(e).toBe(NOT_PLAIN);
      }
      if (bytes) {
        expect(bytes.toString('hex')).toBe(viaFromObject(msg).toString('hex'));
      }
    }
    // Every message here is plain: none went to the fallback.
    expect(written).toBe(400);
  });

  it('writes a run dispatch as the old serializer did', () => {
    const msg = toHostMessage({
      run: {
        runner_id: 'plugin:a/b/c',
        runner_name: 'c',
        traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
        context: {
          run_id: 'r1',
          trigger: { type: 'message.received', source: 'slack', timestamp: 1_700_000_000 },
          event: { event_id: 'e1', event_type: 'message.received', source: 'slack', data: { ts: '1.2', n: [1, 'a'] } },
          conversation: { conversation_id: 'c1', thread_id: 't1' },
          actor: { actor_type: 'user', actor_id: 'u1', metadata: {} },
          input: { text: 'hi', contents: [], attachments: [{ type: 'file', name: 'a.txt', size: 3 }] },
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
            inline_policy: { mode: 'current_event', delivered_count: 0, messages_complete: false, reason: 'x' },
          },
          state: { conversation: { k: { v: 1 } } },
          runtime: { host: 'runner-host', protocol_version: '1', trace_id: 'r1', deadline_at: 1_700_000_300.5 },
          config: { temperature: 0.2 },
          metadata: { agent_id: 'a1' },
        },
      },
    });
    expect(direct(msg).equals(viaFromObject(msg))).toBe(true);
    const cancel = toHostMessage({ cancel: { run_id: 'r1', reason: 'deadline' } });
    expect(direct(cancel).equals(viaFromObject(cancel))).toBe(true);
  });

  it.each([
    ['a number in a string field', { cancel: { run_id: 5, reason: 'x' } }],
    ['a numeric string in an int64 field', { ping: { nonce: '12' } }],
    ['an int64 beyond the safe integers', { ping: { nonce: 2 ** 60 } }],
    ['a key named $type in a Struct', { run: { context: { config: { $type: 1 } } } }],
  ])('leaves %s to fromObject, which converts it: same bytes', (_name, msg) => {
    expect(() => direct(msg)).toThrow(NOT_PLAIN);
    const serialize = directSerializer(viaFromObject);
    expect(serialize(msg).equals(viaFromObject(msg))).toBe(true);
  });

  it('throws what fromObject throws for a value it refuses', () => {
    const serialize = directSerializer(viaFromObject);
    const bad = { run: { context: 'not an object' } };
    expect(() => viaFromObject(bad)).toThrow(TypeError);
    expect(() => serialize(bad)).toThrow(TypeError);
  });

  it('replaces the Connect response serializer of a loaded package definition', () => {
    const loaded = protoLoader.loadSync(protoPath(), LOADER_OPTIONS);
    const service = loaded['runnerhost.v1.RunnerGatewayService'] as protoLoader.ServiceDefinition;
    const before = service.Connect.responseSerialize;
    encodeHostMessagesDirectly(loaded);
    expect(service.Connect.responseSerialize).not.toBe(before);
    const msg = { cancel: { run_id: 'r1', reason: 'deadline' } };
    expect(service.Connect.responseSerialize(msg).equals(before(msg))).toBe(true);
  });
});
