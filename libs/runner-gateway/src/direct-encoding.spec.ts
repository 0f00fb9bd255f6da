import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { Field, Type } from 'protobufjs';
import { LOADER_OPTIONS, NOT_PLAIN, plainEncoder, protoPath, protoType } from '@libs/proto';
import { randomObject, runContextFixture, seededRandom, type JsonShape } from '@libs/testing';
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

/** Struct values: every JSON kind, undefined included, with keys a request body may carry. */
const JSON_SHAPE: JsonShape = {
  kinds: ['null', 'bool', 'number', 'string', 'undefined', 'array', 'object', 'object'],
  leafKinds: 5,
  nestUntil: 2,
  keys: ['a', 'b', '0', '17', 'é', '__proto__', 'with space', '', 'k\u0000', '😀'],
  strings: ['', 'x', 'héllo', '😀', 'a\nb'],
  parsedObjects: true,
};

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
    return randomObject(r, JSON_SHAPE, 0);
  }
  return depth > 6 ? {} : message(r, t, depth + 1);
}

describe('the Connect stream encoded directly', () => {
  it('writes the same bytes as fromObject + encode for random messages of every HostMessage field', () => {
    const r = seededRandom(16);
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
        context: runContextFixture(),
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
