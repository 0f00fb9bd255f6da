import type * as grpc from '@grpc/grpc-js';

/*
 * A bidi method on real grpc-js with JSON bytes for its messages, for the specs of the Connect
 * adapter and its tick writer (connect.grpc.spec.ts, tick-writes.spec.ts): the adapters do not care
 * how messages are encoded.
 */
export const json = {
  serialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
  deserialize: (b: Buffer) => JSON.parse(b.toString()) as unknown,
};

/** A service with one bidi method `Connect` at `path`, JSON both ways. */
export function jsonBidiService(path: string): grpc.ServiceDefinition {
  return {
    Connect: {
      path,
      requestStream: true,
      responseStream: true,
      requestSerialize: json.serialize,
      requestDeserialize: json.deserialize,
      responseSerialize: json.serialize,
      responseDeserialize: json.deserialize,
    },
  };
}

/** Everything a client call received, and how it ended. */
export function follow(call: grpc.ClientDuplexStream<unknown, unknown>) {
  const received: unknown[] = [];
  call.on('data', (m) => received.push(m));
  const ended = new Promise<{ code: number; details: string; xErrorCode: unknown }>((resolve) => {
    call.on('error', () => undefined);
    call.on('status', (s: grpc.StatusObject) =>
      resolve({ code: s.code, details: s.details, xErrorCode: s.metadata.get('x-error-code')[0] }),
    );
  });
  return { received, ended };
}
