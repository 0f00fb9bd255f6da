import * as protoLoader from '@grpc/proto-loader';
import { LOADER_OPTIONS, protoPath, protoType } from '@libs/proto';
import { randomObject, seededRandom, type JsonShape } from '@libs/testing';
import { decodeResultsDirectly, directResultDeserializer } from './direct-decoding';

const def = protoLoader.loadSync(protoPath(), LOADER_OPTIONS);
const connect = (def['runnerhost.v1.RunnerGatewayService'] as protoLoader.ServiceDefinition).Connect;
/** proto-loader's own: `decode` then `toObject`. */
const viaToObject = (bytes: Buffer) => connect.requestDeserialize(bytes);
const direct = directResultDeserializer(viaToObject);
/** The direct decoder alone: a message it leaves to proto-loader fails the test. */
const directOnly = directResultDeserializer(() => {
  throw new Error('left to proto-loader');
});

/** Struct values: every JSON kind, -0 and a long string included, nested four deep. */
const JSON_SHAPE: JsonShape = {
  kinds: ['null', 'bool', 'number', 'string', 'array', 'object'],
  leafKinds: 4,
  nestUntil: 3,
  keys: ['a', 'b', '0', '17', 'é', 'with space', '', 'k\u0000', '😀', 'chunk', 'content'],
  strings: ['', 'x', 'héllo', '😀', 'a\nb', 'x'.repeat(300)],
  parsedObjects: false,
};

function result(r: () => number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const maybe = (k: string, v: () => unknown) => {
    if (r() < 0.7) {
      out[k] = v();
    }
  };
  maybe('run_id', () => ['', 'r1', '0190f0e0-aaaa-7bbb-8ccc-1234567890ab'][Math.floor(r() * 3)]);
  maybe('type', () => ['message.delta', 'message.completed', 'run.completed', ''][Math.floor(r() * 4)]);
  maybe('data', () => randomObject(r, JSON_SHAPE, 0));
  maybe('usage', () => randomObject(r, JSON_SHAPE, 2));
  maybe('sequence', () => [0, 1, 300, 2 ** 40, -1, Number.MAX_SAFE_INTEGER][Math.floor(r() * 6)]);
  maybe('timestamp', () => [0, 1_700_000_000, -5][Math.floor(r() * 3)]);
  return out;
}

/** The same plain value, with the same keys in the same order at every depth. */
function same(a: unknown, b: unknown): void {
  expect(a).toEqual(b);
  expect(JSON.stringify(a)).toBe(JSON.stringify(b));
}

describe('the Connect stream results decoded directly', () => {
  it('knows every field of the messages it reads (a new field must be taught to it first)', () => {
    const fields = (name: string) =>
      protoType('runnerhost/v1/gateway.proto', name).fieldsArray.map((f) => `${f.id}:${f.name}:${f.type}`);
    expect(fields('runnerhost.v1.PluginMessage')).toEqual([
      '1:hello:Hello',
      '2:result:RunResult',
      '3:heartbeat:Heartbeat',
      '4:pong:Pong',
      '5:results:ResultBatch',
    ]);
    expect(fields('runnerhost.v1.ResultBatch')).toEqual(['1:results:RunResult']);
    expect(fields('runnerhost.v1.RunResult')).toEqual([
      '1:run_id:string',
      '2:type:string',
      '3:data:google.protobuf.Struct',
      '4:usage:google.protobuf.Struct',
      '5:sequence:int64',
      '6:timestamp:int64',
    ]);
  });

  it('gives what decode + toObject gives for random results and batches', () => {
    const r = seededRandom(5);
    for (let i = 0; i < 400; i++) {
      const msg =
        r() < 0.6
          ? { result: result(r) }
          : { results: { results: Array.from({ length: Math.floor(r() * 4) }, () => result(r)) } };
      const bytes = connect.requestSerialize(msg);
      same(directOnly(bytes), viaToObject(bytes));
    }
  });

  it('hands every other message to proto-loader', () => {
    for (const msg of [
      { hello: { plugin_author: 'a', plugin_name: 'b', manifests: [{ x: 1 }] } },
      { heartbeat: { active_run_ids: ['r1', 'r2'] } },
      { pong: { nonce: 7 } },
      {},
    ]) {
      const bytes = connect.requestSerialize(msg);
      same(direct(bytes), viaToObject(bytes));
    }
  });

  it('gives the same answer or the same error for corrupted bytes', () => {
    const r = seededRandom(11);
    let refused = 0;
    for (let i = 0; i < 3000; i++) {
      const msg =
        r() < 0.7
          ? { result: result(r) }
          : { results: { results: Array.from({ length: 1 + Math.floor(r() * 3) }, () => result(r)) } };
      const bytes = Buffer.from(connect.requestSerialize(msg));
      const mutated = Buffer.from(bytes);
      for (let n = 1 + Math.floor(r() * 3); n > 0; n--) {
        mutated[Math.floor(r() * mutated.length)] = Math.floor(r() * 256);
      }
      const cut = r() < 0.2 ? mutated.subarray(0, Math.floor(r() * mutated.length)) : mutated;
      let expected: unknown;
      let expectedError: unknown = null;
      try {
        expected = viaToObject(cut);
      } catch (e) {
        expectedError = e;
      }
      if (expectedError) {
        expect(() => direct(cut)).toThrow((expectedError as Error).message);
        refused++;
      } else {
        same(direct(cut), expected);
      }
    }
    // Some of the corruptions are refused: the error is still proto-loader's.
    expect(refused).toBeGreaterThan(0);
  });

  it('leaves a __proto__ key and unknown fields to proto-loader', () => {
    const proto = connect.requestSerialize({
      result: { run_id: 'r', data: JSON.parse('{"__proto__":{"a":1}}') as object },
    });
    same(direct(proto), viaToObject(proto));
    // Field 15 of RunResult, unknown: skipped by protobufjs.
    const unknown = Buffer.concat([Buffer.from([0x12, 0x05, 0x0a, 0x01, 0x72, 0x78, 0x01])]);
    same(direct(unknown), viaToObject(unknown));
  });

  it('replaces the Connect request deserializer of a loaded package definition', () => {
    const loaded = protoLoader.loadSync(protoPath(), LOADER_OPTIONS);
    const service = loaded['runnerhost.v1.RunnerGatewayService'] as protoLoader.ServiceDefinition;
    const before = service.Connect.requestDeserialize;
    decodeResultsDirectly(loaded);
    expect(service.Connect.requestDeserialize).not.toBe(before);
    const bytes = connect.requestSerialize({ result: { run_id: 'r1', type: 't', sequence: 2 } });
    same(service.Connect.requestDeserialize(bytes), before(bytes));
  });
});
