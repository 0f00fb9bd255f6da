import * as http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { detectBatching, tickWriter, type TickWriter } from './tick-writes';
import { follow, json, jsonBidiService } from './testing/json-bidi';

/*
 * The tick writer on a real grpc-js server and client (JSON bytes for the messages), as
 * connect.grpc.spec.ts runs the Connect adapter: what the client receives, whole and in order, and
 * the status it ends with. These pin the grpc-js private fields the writer relies on
 * (tick-writes.ts BatchableCall): a grpc-js release without them fails "uses the batched path".
 */
const PATH = '/test.Ticks/Connect';
const service = jsonBidiService(PATH);

type ServerCall = grpc.ServerDuplexStream<unknown, unknown>;

/** A server whose handler gives each call to `onCall`, and a client of it. */
async function start(onCall: (call: ServerCall) => void, options: grpc.ServerOptions = {}) {
  const server = new grpc.Server(options);
  server.addService(service, { Connect: onCall });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
  });
  return {
    call: () => client.makeBidiStreamRequest<unknown, unknown>(PATH, json.serialize, json.deserialize),
    close: () => {
      client.close();
      server.forceShutdown();
    },
  };
}

/**
 * Runs `script` with a tick writer on the server call and returns what the client saw, with the
 * number of writes the call's HTTP/2 stream took (counted on the stream itself).
 */
async function scenario(
  script: (writer: TickWriter<unknown>, call: ServerCall) => void | Promise<void>,
  options: grpc.ServerOptions = {},
  prepare: (call: ServerCall) => void = () => undefined,
) {
  let writes = 0;
  let batched: boolean | undefined;
  const { call, close } = await start((c) => {
    prepare(c);
    const stream = (c as unknown as { call?: { stream?: http2.ServerHttp2Stream } }).call?.stream;
    if (stream) {
      const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
      (stream as unknown as { write: (...args: unknown[]) => boolean }).write = (...args) => {
        writes += 1;
        return write(...args);
      };
    }
    const writer = tickWriter(c);
    batched = writer.batched;
    c.on('cancelled', writer.closed);
    void script(writer, c);
  }, options);
  try {
    const { received, ended } = follow(call());
    const status = await ended;
    return { received, status, writes, batched };
  } finally {
    close();
  }
}

const nextLoopTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('tickWriter: the messages of one tick as one HTTP/2 write', () => {
  it('uses the batched path on this grpc-js (its private fields are where the writer expects them)', async () => {
    const { batched } = await scenario((w) => w.end());
    expect(batched).toBe(true);
  });

  it('delivers several messages sent in one tick whole and in order, as one write', async () => {
    const many = Array.from({ length: 20 }, (_, i) => ({ n: i, text: 'x'.repeat(i * 7) }));
    const { received, status, writes } = await scenario(async (w) => {
      for (const m of many) {
        w.send(m);
      }
      await nextLoopTurn();
      w.end();
    });
    expect(received).toEqual(many);
    expect(status.code).toBe(grpc.status.OK);
    expect(writes).toBe(1);
  });

  it('writes the messages of later ticks as later writes, still in order', async () => {
    const { received, writes } = await scenario(async (w) => {
      w.send({ n: 1 });
      w.send({ n: 2 });
      await nextLoopTurn();
      await nextLoopTurn();
      w.send({ n: 3 });
      await nextLoopTurn();
      await nextLoopTurn();
      w.end();
    });
    expect(received).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    expect(writes).toBe(2);
  });

  it('ends OK after every message sent before the end, even in the same tick', async () => {
    const { received, status } = await scenario((w) => {
      w.send({ n: 1 });
      w.send({ n: 2 });
      w.end();
      // After the end nothing more is written, nor a second status.
      w.send({ n: 3 });
      w.fail({ code: grpc.status.INTERNAL, details: 'late' });
    });
    expect(received).toEqual([{ n: 1 }, { n: 2 }]);
    expect(status).toMatchObject({ code: grpc.status.OK });
  });

  it("ends with the error's status (code, details, metadata) after every message sent before it", async () => {
    const metadata = new grpc.Metadata();
    metadata.set('x-error-code', 'invalid_argument');
    const { received, status } = await scenario((w) => {
      w.send({ n: 1 });
      w.send({ n: 2 });
      w.fail({ code: grpc.status.INVALID_ARGUMENT, details: 'no hello within 10 s', metadata });
      w.send({ n: 3 });
      w.end();
    });
    expect(received).toEqual([{ n: 1 }, { n: 2 }]);
    expect(status).toEqual({
      code: grpc.status.INVALID_ARGUMENT,
      details: 'no hello within 10 s',
      xErrorCode: 'invalid_argument',
    });
  });

  it('fails a message over the max send size as grpc-js does, after the messages before it', async () => {
    const options = { 'grpc.max_send_message_length': 100 };
    const big = { text: 'y'.repeat(200) };
    const framed = json.serialize(big).length + 5;
    const batched = await scenario((w) => {
      w.send({ n: 1 });
      w.send(big);
      w.send({ n: 2 });
    }, options);
    // grpc-js's own path, call.write, on the same server: the same status.
    const plain = await scenario((_w, call) => {
      call.write({ n: 1 });
      call.write(big);
    }, options);
    expect(batched.received).toEqual([{ n: 1 }]);
    expect(batched.status).toEqual({
      code: grpc.status.RESOURCE_EXHAUSTED,
      details: `Sent message larger than max (${framed} vs. 100)`,
      xErrorCode: undefined,
    });
    expect(plain.received).toEqual([{ n: 1 }]);
    expect(plain.status).toEqual(batched.status);
  });

  it('ends INTERNAL, as grpc-js does, for a message its serializer rejects', async () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const { received, status } = await scenario((w) => {
      w.send({ n: 1 });
      w.send(cyclic);
    });
    expect(received).toEqual([{ n: 1 }]);
    expect(status).toMatchObject({ code: grpc.status.INTERNAL, details: 'Error serializing response' });
  });

  it('delivers messages far over the high-water mark whole and in order, one write in flight at a time', async () => {
    // 64 KiB each, past the HTTP/2 stream's 16 KiB high-water mark and the client's initial
    // flow-control window: the writer waits for each write to complete, as grpc-js does.
    const large = Array.from({ length: 24 }, (_, i) => ({ n: i, text: String.fromCharCode(97 + i).repeat(65536) }));
    let maxBuffered = 0;
    const { received, status, writes } = await scenario(async (w, call) => {
      const stream = (call as unknown as { call: { stream: http2.ServerHttp2Stream } }).call.stream;
      for (let i = 0; i < large.length; i++) {
        w.send(large[i]);
        if (i % 3 === 2) {
          await nextLoopTurn();
        }
        maxBuffered = Math.max(maxBuffered, stream.writableLength);
      }
      w.end();
    });
    expect(status.code).toBe(grpc.status.OK);
    expect(received).toEqual(large);
    expect(writes).toBeLessThanOrEqual(8);
    // One write of at most the sends of a few ticks waits in the stream, not all of them.
    expect(maxBuffered).toBeLessThan(large.length * 65536);
  });

  it('writes nothing more once the client cancelled the call', async () => {
    let sentAfterCancel = false;
    const server = await start((c) => {
      const writer = tickWriter(c);
      c.on('cancelled', () => {
        writer.closed();
        writer.send({ n: 2 });
        writer.end();
        sentAfterCancel = true;
      });
      writer.send({ n: 1 });
    });
    try {
      const c = server.call();
      const { received, ended } = follow(c);
      await new Promise<void>((resolve) => c.once('data', () => resolve()));
      c.cancel();
      expect((await ended).code).toBe(grpc.status.CANCELLED);
      await new Promise<void>((resolve) => {
        const check = () => (sentAfterCancel ? resolve() : setImmediate(check));
        check();
      });
      expect(received).toEqual([{ n: 1 }]);
    } finally {
      server.close();
    }
  });
});

describe('tickWriter: the fallback when grpc-js has no such private fields', () => {
  it('writes each message with call.write, in order, then the status', async () => {
    const { received, status, batched } = await scenario(
      (w) => {
        w.send({ n: 1 });
        w.send({ n: 2 });
        w.fail({ code: grpc.status.UNAVAILABLE, details: 'draining' });
      },
      {},
      // Another grpc-js: the server call's max send size is not a number where the writer looks
      // (a missing serializer, which grpc-js's own call.write needs too, is pinned below).
      (call) => {
        const inner = (call as unknown as { call: Record<string, unknown> }).call;
        inner.maxSendMessageSize = '4194304';
      },
    );
    expect(batched).toBe(false);
    expect(received).toEqual([{ n: 1 }, { n: 2 }]);
    expect(status).toMatchObject({ code: grpc.status.UNAVAILABLE, details: 'draining' });
  });

  it('is chosen when any private field is missing or of another type', () => {
    expect(detectBatching({})).toBeNull();
    expect(detectBatching({ call: {} })).toBeNull();
    expect(detectBatching({ call: { stream: {}, serializeMessage: () => Buffer.alloc(0) } })).toBeNull();
    expect(
      detectBatching({ call: { stream: {}, serializeMessage: () => Buffer.alloc(0), maxSendMessageSize: 4 } }),
    ).toBeNull();
  });
});
